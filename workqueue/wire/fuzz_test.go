package wire

import (
	"bytes"
	"io"
	"reflect"
	"testing"
)

// FuzzConn feeds arbitrary bytes to the reader the way a session does: a
// message, then its body or task description. It must never panic, never
// allocate past its limits, and every message it accepts must print back to
// a line that parses to the same message.
func FuzzConn(f *testing.F) {
	for _, tc := range transcriptLines {
		f.Add([]byte(tc.line + "\n"))
	}
	f.Add([]byte("task 2\n" + transcriptTask))
	f.Add([]byte("result 0 3 8 2316 1\nfailing\nend\n"))
	f.Add([]byte("put a%20b 3 0755\nxyzdir d\nput x 1 0644\n1end\n"))
	f.Add([]byte("file f 99999999999999\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := NewConn(rw(string(data)), Limits{Line: 256, Body: 1 << 12, File: 1 << 12})
		for i := 0; i < 64; i++ {
			m, err := c.ReadMessage()
			if err == io.EOF {
				return
			}
			if err != nil {
				if _, ok := err.(*ParseError); !ok {
					return // a read error ends a session
				}
				continue
			}
			line := m.AppendTo(nil)
			back, err := Parse(bytes.TrimSuffix(line, []byte("\n")))
			if err != nil || !reflect.DeepEqual(back, m) {
				t.Fatalf("%#v printed as %q, which parses to %#v, %v", m, line, back, err)
			}
			var rerr error
			switch m := m.(type) {
			case Task:
				var spec *TaskSpec
				spec, rerr = c.ReadTask(m.ID)
				if rerr == nil {
					again, err := NewConn(rw(string(AppendTask(nil, spec))[len(Task{ID: m.ID}.AppendTo(nil)):]), Limits{}).ReadTask(m.ID)
					if err != nil || !reflect.DeepEqual(again, spec) {
						t.Fatalf("task %#v does not round-trip: %#v, %v", spec, again, err)
					}
				}
			case Put:
				rerr = c.DiscardBody(m.Size)
			case File:
				rerr = c.DiscardBody(m.Size)
			case Result:
				_, rerr = c.ReadBody(m.Size)
			}
			if rerr != nil {
				return
			}
		}
	})
}
