package checkprobe

import "github.com/arkadiuss/openfief/internal/check/probewire"

// cleanDetail makes s a Result.Detail: printable ASCII (anything else
// becomes '?'), at most probewire.MaxDetailBytes.
func cleanDetail(s string) string {
	b := []byte(s)
	if len(b) > probewire.MaxDetailBytes {
		b = append(b[:probewire.MaxDetailBytes-3], "..."...)
	}
	for i, c := range b {
		if c < ' ' || c > '~' {
			b[i] = '?'
		}
	}
	return string(b)
}
