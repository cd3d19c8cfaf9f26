package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	if err := generate(dir, pageDate); err != nil {
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

// TestPageDates: a page's .TH date is $SOURCE_DATE_EPOCH's, else the last
// commit's of its command, else none; never the day it was made.
func TestPageDates(t *testing.T) {
	may2021 := time.Date(2021, 5, 17, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		date   func(pkg string) (*time.Time, error)
		wantTH string // makeflow.1's and workqueue-worker.1's
	}{
		{"dated", func(string) (*time.Time, error) { return &may2021, nil }, `.TH "MAKEFLOW" "1" "May 2021" `},
		{"no date", func(string) (*time.Time, error) { return nil, nil }, `.TH "MAKEFLOW" "1" "" `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := generate(dir, tt.date); err != nil {
				t.Fatal(err)
			}
			for page, th := range map[string]string{
				"makeflow.1":         tt.wantTH,
				"workqueue-worker.1": strings.Replace(tt.wantTH, "MAKEFLOW", "WORKQUEUE", 1),
			} {
				b, err := os.ReadFile(filepath.Join(dir, page))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(b, []byte("\n"+th)) {
					t.Errorf("%s: no line %q in\n%.300s", page, th, b)
				}
			}
		})
	}
}

// TestPageDate: where the date comes from.
func TestPageDate(t *testing.T) {
	const pkg = "github.com/rightsize/rightsize/internal/makeflowcmd"
	var lastCommit time.Time
	if out, err := exec.Command("git", "log", "-1", "--format=%ct").Output(); err == nil {
		sec, _ := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		lastCommit = time.Unix(sec, 0).UTC()
	}
	tests := []struct {
		name, epoch string
		want        func(*time.Time) bool
		wantErr     bool
	}{
		{"SOURCE_DATE_EPOCH", "1680000000", func(d *time.Time) bool { return d != nil && d.Equal(time.Unix(1680000000, 0)) }, false},
		{"bad SOURCE_DATE_EPOCH", "March", nil, true},
		// No later than the repository's last commit, from which the
		// command is built: the page does not change with the clock.
		{"last commit", "", func(d *time.Time) bool {
			return lastCommit.IsZero() && d == nil || d != nil && !d.After(lastCommit) && d.Year() >= 2024
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("SOURCE_DATE_EPOCH", tt.epoch)
			d, err := pageDate(pkg)
			if (err != nil) != tt.wantErr || err == nil && !tt.want(d) {
				t.Errorf("pageDate = %v, %v", d, err)
			}
		})
	}
}
