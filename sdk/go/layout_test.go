// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"bufio"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// layoutMap is the table in sdk/README.md that names each file of the Go SDK
// beside its TypeScript counterpart.
const layoutMap = "../README.md"

// layoutRow is one row of the map: the files named on each side, relative
// to sdk/go and sdk/ts.
type layoutRow struct {
	line   int
	goSide []string
	tsSide []string
}

var backticked = regexp.MustCompile("`([^`]+)`")

// readLayoutMap reads the rows of the map's table: those whose first two
// cells name files in backticks or hold a dash.
func readLayoutMap(t *testing.T) []layoutRow {
	t.Helper()
	f, err := os.Open(layoutMap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() //nolint:errcheck // opened read-only
	var rows []layoutRow
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		cells := strings.Split(sc.Text(), "|")
		if len(cells) < 4 || !strings.HasPrefix(sc.Text(), "| ") {
			continue
		}
		goCell, tsCell := strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2])
		if strings.HasPrefix(goCell, "Go (") || strings.HasPrefix(goCell, "---") {
			continue
		}
		row := layoutRow{line: n}
		for _, m := range backticked.FindAllStringSubmatch(goCell, -1) {
			row.goSide = append(row.goSide, m[1])
		}
		for _, m := range backticked.FindAllStringSubmatch(tsCell, -1) {
			row.tsSide = append(row.tsSide, m[1])
		}
		if (len(row.goSide) == 0) != (goCell == "—") || (len(row.tsSide) == 0) != (tsCell == "—") {
			t.Errorf("%s:%d: each side is files in backticks or a dash", layoutMap, n)
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no table of files found", layoutMap)
	}
	return rows
}

// sdkFiles lists the files of one SDK the map must name: those under dirs
// (relative to root, walked without descending into gen/) whose names end in
// ext, relative to root with forward slashes.
func sdkFiles(t *testing.T, root string, dirs []string, ext string) map[string]bool {
	t.Helper()
	files := map[string]bool{}
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "gen" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(p, ext) {
				rel, err := filepath.Rel(root, p)
				if err != nil {
					return err
				}
				files[filepath.ToSlash(rel)] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// counterpart is the TypeScript file a Go file of the same name has: x.go is
// src/x.ts, x_test.go is test/x.test.ts (test/helpers.ts for the helpers),
// a package's doc.go is its index.ts; delivery/ is src/delivery/ and
// test/delivery/.
func counterpart(goFile string) string {
	dir, name := path.Split(goFile)
	if stem, ok := strings.CutSuffix(name, "_test.go"); ok {
		if stem == "helpers" {
			return "test/" + dir + "helpers.ts"
		}
		return "test/" + dir + stem + ".test.ts"
	}
	stem := strings.TrimSuffix(name, ".go")
	if stem == "doc" {
		stem = "index"
	}
	return "src/" + dir + stem + ".ts"
}

// TestSDKLayoutMap holds the two SDKs to the map in sdk/README.md, so that
// a file mirrored in the other SDK keeps its name there, and a file added to
// either is placed in the map.
func TestSDKLayoutMap(t *testing.T) {
	const tsRoot = "../ts"
	if _, err := os.Stat(filepath.Join(tsRoot, "package.json")); err != nil {
		t.Skip("the TypeScript SDK is not beside this module:", err)
	}
	goFiles := sdkFiles(t, ".", []string{"."}, ".go")
	tsFiles := sdkFiles(t, tsRoot, []string{"src", "test"}, ".ts")
	rows := readLayoutMap(t)
	named := map[string]bool{}
	for _, row := range rows {
		for _, f := range row.goSide {
			if !goFiles[f] {
				t.Errorf("%s:%d: sdk/go/%s does not exist", layoutMap, row.line, f)
			}
			named["go:"+f] = true
		}
		for _, f := range row.tsSide {
			if !tsFiles[f] {
				t.Errorf("%s:%d: sdk/ts/%s does not exist", layoutMap, row.line, f)
			}
			named["ts:"+f] = true
		}
		if len(row.goSide) > 0 && len(row.tsSide) > 0 {
			if len(row.goSide) != 1 || len(row.tsSide) != 1 {
				t.Errorf("%s:%d: a row with both sides names one file on each", layoutMap, row.line)
			} else if want := counterpart(row.goSide[0]); row.tsSide[0] != want {
				t.Errorf("%s:%d: %s mirrors %s, so it is named %s", layoutMap, row.line, row.tsSide[0], row.goSide[0], want)
			}
		}
	}
	for f := range goFiles {
		if !named["go:"+f] {
			t.Errorf("sdk/go/%s is not in the map in %s", f, layoutMap)
		}
	}
	for f := range tsFiles {
		if !named["ts:"+f] {
			t.Errorf("sdk/ts/%s is not in the map in %s", f, layoutMap)
		}
	}
	// A one-sided row must not hide a file the other SDK has under the
	// same name: that pair belongs in one row.
	for f := range goFiles {
		if ts := counterpart(f); tsFiles[ts] && !sameRow(rows, f, ts) {
			t.Errorf("sdk/go/%s and sdk/ts/%s share a name but not a row of the map", f, ts)
		}
	}
}

// sameRow reports whether one row of rows names both goFile and tsFile.
func sameRow(rows []layoutRow, goFile, tsFile string) bool {
	for _, r := range rows {
		if len(r.goSide) == 1 && len(r.tsSide) == 1 && r.goSide[0] == goFile && r.tsSide[0] == tsFile {
			return true
		}
	}
	return false
}
