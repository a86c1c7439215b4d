package plugins

import (
	"reflect"
	"testing"
)

func TestEncodeAllowLists(t *testing.T) {
	got := EncodeAllowLists(AllowLists{
		"bank":   {"files.example.com:8443", "API.example.com", "api.example.com:443", "bücher.example"},
		"nohost": nil,
		"empty":  {},
	})
	want := map[string]string{
		"bank":   "api.example.com:443\nfiles.example.com:8443\nxn--bcher-kva.example:443\n",
		"nohost": "",
		"empty":  "",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("EncodeAllowLists\n got %q\nwant %q", got, want)
	}
	// Found by FuzzEncodeAllowLists: invalid UTF-8 canonicalises to an xn--
	// label that does not canonicalise again, so the decoder would refuse
	// the whole document. The encoder drops it instead.
	if got := EncodeAllowList([]string{"0\xa3\xa7\xf7\xad.A", "a.example"}); got != "a.example:443\n" {
		t.Errorf("EncodeAllowList kept an entry it cannot read back: %q", got)
	}
	if got := EncodeAllowLists(nil); len(got) != 0 {
		t.Errorf("EncodeAllowLists(nil) = %q, want empty", got)
	}
}

func TestDecodeAllowLists(t *testing.T) {
	t.Run("valid", func(t *testing.T) {
		data := map[string]string{
			"bank":   "api.example.com:443\nfiles.example.com:8443\n",
			"nohost": "",
		}
		got, err := DecodeAllowLists(data)
		if err != nil {
			t.Fatalf("DecodeAllowLists: %v", err)
		}
		want := AllowLists{"bank": {"api.example.com:443", "files.example.com:8443"}, "nohost": {}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeAllowLists\n got %q\nwant %q", got, want)
		}
		if again := EncodeAllowLists(got); !reflect.DeepEqual(again, data) {
			t.Errorf("EncodeAllowLists(DecodeAllowLists(x)) = %q, want x = %q", again, data)
		}
		if !got.Allows("bank", "files.example.com:8443") || got.Allows("bank", "files.example.com:443") || got.Allows("nohost", "api.example.com:443") || got.Allows("other", "api.example.com:443") {
			t.Errorf("Allows answers wrongly for %q", got)
		}
	})

	tests := map[string]map[string]string{
		"key is not a plugin name": {"Bank": ""},
		"key is empty":             {"": ""},
		"port missing":             {"bank": "api.example.com\n"},
		"upper case":               {"bank": "API.example.com:443\n"},
		"no final newline":         {"bank": "api.example.com:443"},
		"blank line":               {"bank": "api.example.com:443\n\n"},
		"only a newline":           {"bank": "\n"},
		"repeated host":            {"bank": "api.example.com:443\napi.example.com:443\n"},
		"out of order":             {"bank": "files.example.com:443\napi.example.com:443\n"},
		"CRLF":                     {"bank": "api.example.com:443\r\n"},
		"Unicode host":             {"bank": "bücher.example:443\n"},
		"wildcard":                 {"bank": "*.example.com:443\n"},
		"IP literal":               {"bank": "10.0.0.1:443\n"},
		"single label":             {"bank": "core:443\n"},
		"port with a leading zero": {"bank": "api.example.com:0443\n"},
		"port out of range":        {"bank": "api.example.com:65536\n"},
		"leading space":            {"bank": " api.example.com:443\n"},
		"one bad plugin of two":    {"bank": "api.example.com:443\n", "fx": "x\n"},
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeAllowLists(data)
			trCheckErr(t, err, ErrInvalidAllowList, "")
			if got != nil {
				t.Errorf("a refused document still decoded to %q", got)
			}
		})
	}
}
