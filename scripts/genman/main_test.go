package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	if err := generate(dir); err != nil {
		t.Fatal(err)
	}
	for page, want := range map[string][]string{
		"allpairs.1":         {".TH \"ALLPAIRS\" \"1\"", "\\fB--report\\fP", "\\fB--completion\\fP"},
		"wavefront.1":        {".SH NAME", "\\fB--http\\fP"},
		"makeflow.1":         {"THE LANGUAGE", "\\fB--version\\fP"},
		"makeflow_analyze.1": {".SH NAME", "\\fB--syntax-check\\fP"},
		"workqueue-worker.1": {".SH NAME", "workqueue-worker - run tasks"},
	} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s lacks %q", page, w)
			}
		}
	}
}
