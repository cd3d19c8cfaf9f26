package status

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, h http.Handler, path string) (string, *http.Response) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	return string(b), res
}

func running() *Tracker {
	c := &clock{time.Unix(1000, 0)}
	tr := newTest(c)
	c.advance(30 * time.Second)
	tr.Progress(40, 10, 3, 1)
	tr.Update(func(s *Snapshot) {
		s.Mode, s.Backend, s.Predicted = "hybrid", "wq", 95
		s.Workers = []Worker{{Name: "this machine", Cores: 2, Running: 2, Completed: 6}, {Name: "10.0.0.7:4021", Cores: 8, Running: 1, Completed: 4, FastAborts: 1},
			{Name: "3 more workers", Cores: 12, Count: 3}}
		s.Capacity = 4.4
	})
	tr.Fail(Failure{Name: "rule 7 (wf.mf:12)", Status: "exit status 2", Stderr: "<script>alert(1)</script> missing input"})
	return tr
}

func TestStatusJSON(t *testing.T) {
	body, res := get(t, Handler(running()), "/status")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /status: %v %v", res.Status, res.Header)
	}
	var s Snapshot
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if s.Done != 10 || s.Total != 40 || s.Elapsed != 30 || len(s.Workers) != 3 || s.Capacity != 4.4 || s.Mode != "hybrid" || len(s.Failures) != 1 || s.Finished {
		t.Errorf("status %+v", s)
	}
}

func TestPage(t *testing.T) {
	body, res := get(t, Handler(running()), "/")
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %v %v", res.Status, res.Header)
	}
	for _, want := range []string{
		`<span id="done">10</span> of <span id="total">40</span>`,
		`width: 25.0%`,
		`<td>10.0.0.7:4021</td><td>8</td><td>1</td><td>4</td><td>1</td>`,
		`hybrid on wq`,
		`<span id="capacity-workers">4</span> workers busy`,
		// A worker's stderr is text, never markup.
		`&lt;script&gt;alert(1)&lt;/script&gt; missing input`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>alert") || strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Error("the page holds injected markup or reaches outside its server")
	}
}

func TestMetrics(t *testing.T) {
	body, res := get(t, Handler(running()), "/metrics")
	if res.StatusCode != 200 {
		t.Fatalf("GET /metrics: %v", res.Status)
	}
	for _, want := range []string{
		`rightsize_units{tool="makeflow",unit="rules"} 40`,
		`rightsize_units_done{tool="makeflow",unit="rules"} 10`,
		`rightsize_units_failed{tool="makeflow",unit="rules"} 1`,
		`rightsize_elapsed_seconds{tool="makeflow",unit="rules"} 30`,
		`rightsize_predicted_seconds{tool="makeflow",unit="rules"} 95`,
		`rightsize_worker_cores{tool="makeflow",unit="rules"} 22`,
		`rightsize_workers{tool="makeflow",unit="rules"} 5`,
		`rightsize_capacity_workers{tool="makeflow",unit="rules"} 4.4`,
		`rightsize_finished{tool="makeflow",unit="rules"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}

func TestPicture(t *testing.T) {
	tr := running()
	if _, res := get(t, Handler(tr), "/picture.png"); res.StatusCode != 404 {
		t.Errorf("no picture: %v", res.Status)
	}
	tr.SetPicture(func() ([]byte, error) { return []byte("\x89PNG"), nil })
	if body, res := get(t, Handler(tr), "/picture.png"); res.StatusCode != 200 || body != "\x89PNG" || res.Header.Get("Content-Type") != "image/png" {
		t.Errorf("picture: %v %q", res.Status, body)
	}
	if s := tr.Snapshot(); s.Picture != "picture.png" {
		t.Errorf("snapshot's picture %q", s.Picture)
	}
}

func TestServeBindsLoopback(t *testing.T) {
	for _, addr := range []string{":0", "0"} {
		srv, err := Serve(addr, running())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(srv.URL(), "http://127.0.0.1:") {
			t.Errorf("Serve(%q) listens at %s, want the loopback interface", addr, srv.URL())
		}
		res, err := http.Get(srv.URL() + "status")
		if err != nil || res.StatusCode != 200 {
			t.Errorf("GET %sstatus: %v %v", srv.URL(), res, err)
		}
		res.Body.Close()
		srv.Close()
	}
	if _, err := Serve("127.0.0.1:notaport", running()); err == nil {
		t.Error("a bad address was served")
	}
}

func TestListenAddr(t *testing.T) {
	for _, tc := range []struct {
		addr, want string
		bad        bool
	}{
		{addr: ":8080", want: "127.0.0.1:8080"},
		{addr: "8080", want: "127.0.0.1:8080"},
		{addr: ":0", want: "127.0.0.1:0"},
		{addr: "0.0.0.0:80", want: "0.0.0.0:80"},
		{addr: "[::1]:9000", want: "[::1]:9000"},
		{addr: "localhost", bad: true},
		{addr: ":http", bad: true},
		{addr: ":70000", bad: true},
		{addr: "host:", bad: true},
	} {
		got, err := ListenAddr(tc.addr)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ListenAddr(%q) = %q, %v; want %q, error %v", tc.addr, got, err, tc.want, tc.bad)
		}
	}
}
