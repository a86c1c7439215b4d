package webdavcsv

import "testing"

// TestNeutralise: anything a spreadsheet could run as a formula gets a
// leading quote; plain decimals, negative ones included, stay numbers.
func TestNeutralise(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "",
		"-12.50":           "-12.50",
		"-0.3":             "-0.3",
		"-1":               "-1",
		"12":               "12",
		"4.2840":           "4.2840",
		"Café =1+1":        "Café =1+1",
		"a=b":              "a=b",
		"=1+2":             "'=1+2",
		`=HYPERLINK("x")`:  `'=HYPERLINK("x")`,
		"+48 600 100 200":  "'+48 600 100 200",
		"+1":               "'+1", // the contract never writes '+'
		"-2+3+cmd|' /C'!A": "'-2+3+cmd|' /C'!A",
		"-1+1":             "'-1+1",
		"-1e5":             "'-1e5",
		"-.5":              "'-.5",
		"-5.":              "'-5.",
		"--1":              "'--1",
		"-":                "'-",
		"- 1":              "'- 1",
		"-fee":             "'-fee",
		"@SUM(A1:A9)":      "'@SUM(A1:A9)",
		"\t=1":             "'\t=1",
		"\r=1":             "'\r=1",
		"\n=1":             "'\n=1",
		"'=1":              "'=1",
	} {
		if got := Neutralise(in); got != want {
			t.Errorf("Neutralise(%q) = %q, want %q", in, got, want)
		}
	}
}
