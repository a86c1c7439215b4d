package display

import (
	"testing"
	"time"
)

func TestAge(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := map[string]struct {
		t    time.Time
		want string
	}{
		"zero":    {time.Time{}, Unknown},
		"seconds": {now.Add(-45 * time.Second), "45s"},
		"hours":   {now.Add(-3 * time.Hour), "3h"},
		"days":    {now.Add(-12 * 24 * time.Hour), "12d"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Age(now, tt.t); got != tt.want {
				t.Errorf("Age = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestOwnerSlots(t *testing.T) {
	want := "up to 2 of your choosing; the vendor names none (name one with openfief plugin approve NAME --host HOST)"
	if got := OwnerSlots(2); got != want {
		t.Errorf("OwnerSlots(2) = %q, want %q", got, want)
	}
}
