package wire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
)

// Lines taken from a real exchange between Debian's CCTools master and worker.
var transcriptLines = []struct {
	line string
	want Message
}{
	{"workqueue 9 vm Linux x86_64 8.0.0", Hello{Protocol: 9, Host: "vm", OS: "Linux", Arch: "x86_64", Version: "8.0.0"}},
	{"info worker-id worker-bbae898a4aaba52aa70324ffe53baed5", Info{Key: "worker-id", Value: "worker-bbae898a4aaba52aa70324ffe53baed5"}},
	{"alive", Alive{}},
	{"resource workers 1 1 1", Resource{Name: "workers", Total: 1, Smallest: 1, Largest: 1}},
	{"resource disk 1000 1000 1000", Resource{Name: "disk", Total: 1000, Smallest: 1000, Largest: 1000}},
	{"resource tag 0", Resource{Name: "tag"}},
	{"info end_of_resource_update 0", Info{Key: "end_of_resource_update", Value: "0"}},
	{"put file-0-6543ffb2579249f880d44bee475e3ad3-shared.dat 51 0644", Put{Name: "file-0-6543ffb2579249f880d44bee475e3ad3-shared.dat", Size: 51, Mode: 0o644}},
	{"task 2", Task{ID: 2}},
	{"available_results", AvailableResults{}},
	{"send_results -1", SendResults{N: -1}},
	{"result 0 3 8 2316 1", Result{Status: 0, Exit: 3, Size: 8, ExecUsec: 2316, TaskID: 1}},
	{"end", End{}},
	{"get file-0-8cf873a5a36e739e9249e58111c5bc0b-bad.txt 1", Get{Name: "file-0-8cf873a5a36e739e9249e58111c5bc0b-bad.txt", Recursive: true}},
	{"missing file-0-8cf873a5a36e739e9249e58111c5bc0b-bad.txt 2", Missing{Name: "file-0-8cf873a5a36e739e9249e58111c5bc0b-bad.txt", Errno: 2}},
	{"file file-0-00ba29caee102c5fd3d95cb0a433d523-out.txt 14", File{Name: "file-0-00ba29caee102c5fd3d95cb0a433d523-out.txt", Size: 14}},
	{"kill 1", Kill{ID: 1}},
	{"release", Release{}},
	{"dir file-0-98f1b5a2506c6e4773c499a05a229ac0-indir", Dir{Name: "file-0-98f1b5a2506c6e4773c499a05a229ac0-indir"}},
	{"dir file-0-3926f86ff36dd3d97607a9a9a6217b0a-outdir/x 0", Dir{Name: "file-0-3926f86ff36dd3d97607a9a9a6217b0a-outdir/x", Reply: true}},
	{"auth password sha1", Auth{Method: "sha1"}},
	{"queue_status", StatusQuery{Kind: "queue"}},
	{"check", Check{}},
	{"unlink a%20b", Unlink{Name: "a b"}},
}

func TestParseTranscript(t *testing.T) {
	for _, tc := range transcriptLines {
		got, err := Parse([]byte(tc.line))
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.line, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Parse(%q) = %#v, want %#v", tc.line, got, tc.want)
		}
		if back := string(got.AppendTo(nil)); back != tc.line+"\n" {
			t.Errorf("AppendTo(Parse(%q)) = %q", tc.line, back)
		}
	}
}

func TestParseRejects(t *testing.T) {
	bad := []string{
		"", "bogus", "put x 10", "put x -1 0644", "put x 10 0999", "result 0 0 -5 1 1",
		"result 0 0 5 1", "task -3", "task x", "kill", "resource cores NaN 1 1",
		"resource cores -1 1 1", "file a%2 3", "workqueue nine a b c d", "get", "auth kerberos x",
		"missing a -1", "send_results 99999999999", "info", "end now", "alive 1",
	}
	for _, line := range bad {
		if m, err := Parse([]byte(line)); err == nil {
			t.Errorf("Parse(%q) = %#v, want error", line, m)
		}
	}
}

func TestNames(t *testing.T) {
	for _, s := range []string{"in.txt", "a b", "100%", "naïve", "x\ty", `q"'<>\`, "{~}"} {
		enc := EncodeName(s)
		if strings.ContainsAny(enc, " \t\n%") && !strings.Contains(enc, "%") {
			t.Errorf("EncodeName(%q) = %q keeps a separator", s, enc)
		}
		dec, err := DecodeName(enc)
		if err != nil || dec != s {
			t.Errorf("DecodeName(EncodeName(%q)) = %q, %v", s, dec, err)
		}
	}
	unsafe := []string{"", "/etc/passwd", "../x", "a/../../x", "a/..", "x\x00y", ".", "./"}
	for _, s := range unsafe {
		if err := CheckRelativePath(s); !errors.Is(err, ErrUnsafeName) {
			t.Errorf("CheckRelativePath(%q) = %v, want ErrUnsafeName", s, err)
		}
	}
	for _, s := range []string{"a", "a/b", "./a", "a..b", "dir/x.txt"} {
		if err := CheckRelativePath(s); err != nil {
			t.Errorf("CheckRelativePath(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"a/b", "..", ".", ""} {
		if err := CheckCacheName(s); err == nil {
			t.Errorf("CheckCacheName(%q) accepted", s)
		}
	}
}

// A task exactly as Debian's CCTools makeflow sent it.
const transcriptTask = "cmd 72\ncat remote_in.txt > remote_out.txt; wc -l < shared.dat >> remote_out.txt" +
	"category small\ncores 1.000\ngpus 0\nmemory 100\ndisk 500\n" +
	"env 14\nCATEGORY=small\nenv 10\nMEMORY=100\nenv 7\nCORES=1\nenv 17\nOMP_NUM_THREADS=1\n" +
	"infile file-0-6543ffb2579249f880d44bee475e3ad3-shared.dat shared.dat 1\n" +
	"infile file-0-fc91f21b3f8552b556a1ea9731c804d5-in.txt remote_in.txt 1\n" +
	"outfile file-0-00ba29caee102c5fd3d95cb0a433d523-out.txt remote_out.txt 1\nend\n"

func TestReadTaskTranscript(t *testing.T) {
	c := NewConn(rw(transcriptTask), Limits{})
	got, err := c.ReadTask(2)
	if err != nil {
		t.Fatal(err)
	}
	want := &TaskSpec{
		ID: 2, Command: "cat remote_in.txt > remote_out.txt; wc -l < shared.dat >> remote_out.txt",
		Category: "small", Cores: 1, GPUs: 0, MemoryMB: 100, DiskMB: 500,
		Env: []string{"CATEGORY=small", "MEMORY=100", "CORES=1", "OMP_NUM_THREADS=1"},
		Inputs: []TaskFile{
			{"file-0-6543ffb2579249f880d44bee475e3ad3-shared.dat", "shared.dat", 1},
			{"file-0-fc91f21b3f8552b556a1ea9731c804d5-in.txt", "remote_in.txt", 1},
		},
		Outputs: []TaskFile{{"file-0-00ba29caee102c5fd3d95cb0a433d523-out.txt", "remote_out.txt", 1}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadTask = %#v\nwant %#v", got, want)
	}
	if back := string(AppendTask(nil, got)); back != "task 2\n"+transcriptTask {
		t.Errorf("AppendTask differs from CCTools:\n%q\n%q", back, "task 2\n"+transcriptTask)
	}
}

func TestReadTaskRejects(t *testing.T) {
	cases := map[string]string{
		"absolute name":  "cmd 4\ntrueinfile c /etc/passwd 1\nend\n",
		"dotdot name":    "outfile c ../../x 0\nend\n",
		"cache with dir": "infile a/b x 0\nend\n",
		"huge cmd":       "cmd 99999999999\n",
		"short body":     "cmd 10\nabc",
		"bad env":        "env 4\nabc\nend\n",
		"unknown":        "frobnicate 1\nend\n",
		"eof":            "cores 1\n",
		"negative":       "memory -5\nend\n",
	}
	for name, body := range cases {
		c := NewConn(rw(body), Limits{Body: 1 << 20})
		if spec, err := c.ReadTask(1); err == nil {
			t.Errorf("%s: ReadTask = %+v, want error", name, spec)
		}
	}
}

func TestLimits(t *testing.T) {
	c := NewConn(rw(strings.Repeat("x", 100)+"\n"), Limits{Line: 50})
	if _, err := c.ReadLine(); !errors.Is(err, ErrTooLong) {
		t.Errorf("long line: %v, want ErrTooLong", err)
	}
	c = NewConn(rw("abc"), Limits{File: 2})
	if err := c.CopyBody(io.Discard, 3); !errors.Is(err, ErrTooLong) {
		t.Errorf("long file: %v, want ErrTooLong", err)
	}
	c = NewConn(rw("abcdef\nend\n"), Limits{})
	if err := c.CopyBody(GuardWriter(failWriter{}), 7); err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("failing destination: %v", err)
	}
	if m, err := c.ReadMessage(); err != nil || m != (End{}) {
		t.Errorf("stream out of step after failing destination: %v %v", m, err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// tcpPair returns both ends of a loopback TCP connection: the exchange needs
// the kernel's buffering, which net.Pipe does not have.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func rw(s string) io.ReadWriter {
	return struct {
		io.Reader
		io.Writer
	}{strings.NewReader(s), &bytes.Buffer{}}
}

// CCTools workers print the names of the outputs they send without
// encoding them: a name with spaces arrives as it is.
func TestParseUnencodedNames(t *testing.T) {
	tests := []struct {
		line string
		want Message
	}{
		{"missing file-23-abc-spaced out.txt 2", Missing{Name: "file-23-abc-spaced out.txt", Errno: 2}},
		{"file file-1-79958a-mydir/a b.txt 4", File{Name: "file-1-79958a-mydir/a b.txt", Size: 4}},
		{"file file-1-x/two  spaces 7", File{Name: "file-1-x/two  spaces", Size: 7}},
		{"dir file-1-x/sub dir 0", Dir{Name: "file-1-x/sub dir", Reply: true}},
	}
	for _, tt := range tests {
		if m, err := Parse([]byte(tt.line)); err != nil || m != tt.want {
			t.Errorf("Parse(%q) = %#v, %v; want %#v", tt.line, m, err, tt.want)
		}
	}
}
