package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// File flags of infile and outfile lines.
const (
	FlagCache       = 1  // keep the file in the worker's cache after the task
	FlagPreexist    = 4  // the file is already on the worker
	FlagWatch       = 16 // stream the file back while the task runs
	FlagFailureOnly = 32 // fetch the output only if the task failed
	FlagSuccessOnly = 64 // fetch the output only if the task succeeded
)

// TaskFile is one input or output of a task: the name it has in the worker's
// cache and the (relative) name the command sees in its sandbox.
type TaskFile struct {
	CacheName string
	Remote    string
	Flags     int
}

// TaskSpec is everything between "task ID" and "end". Resource fields hold
// what the master sent; a negative value means it sent none.
type TaskSpec struct {
	ID        int
	Command   string
	Coprocess string
	Category  string
	Cores     float64
	GPUs      int64
	MemoryMB  int64
	DiskMB    int64
	EndTime   int64 // seconds since the epoch, 0 for none
	WallTime  int64 // seconds, 0 for none
	Env       []string
	Inputs    []TaskFile
	Outputs   []TaskFile
	EmptyDirs []string // empty input directories to create in the sandbox
}

// ReadTask reads a task description after its "task ID" line, up to and
// including "end". Names are checked: cache names must be single path
// elements and sandbox names must stay inside the sandbox.
func (c *Conn) ReadTask(id int) (*TaskSpec, error) {
	t := &TaskSpec{ID: id, Category: "default", Cores: -1, GPUs: -1, MemoryMB: -1, DiskMB: -1}
	var buf [8][]byte
	for {
		line, err := c.ReadLine()
		if err != nil {
			return nil, fmt.Errorf("task %d: %w", id, err)
		}
		f := fields(line, buf[:0])
		if len(f) == 0 {
			return nil, parseErr(line, "empty line in task %d", id)
		}
		kw := string(f[0])
		args := f[1:]
		bad := func(why string) error { return parseErr(line, "task %d: %s", id, why) }
		switch kw {
		case "end":
			if len(args) != 0 {
				return nil, bad("end takes no arguments")
			}
			return t, nil
		case "cmd", "coprocess", "env":
			if len(args) != 1 {
				return nil, bad(kw + " takes a length")
			}
			n, err := atoi(args[0])
			if err != nil {
				return nil, bad("bad length")
			}
			if kw == "env" && n >= 0 {
				n++ // CCTools follows an environment entry with a newline it does not count
			}
			body, err := c.ReadBody(n)
			if err != nil {
				return nil, fmt.Errorf("task %d: %s: %w", id, kw, err)
			}
			switch kw {
			case "cmd":
				t.Command = string(body)
			case "coprocess":
				t.Coprocess = string(body)
			default:
				if body[len(body)-1] != '\n' {
					return nil, bad("environment entry without its newline")
				}
				e := string(body[:len(body)-1])
				if k, _, ok := strings.Cut(e, "="); !ok || k == "" || strings.ContainsRune(e, 0) {
					return nil, bad(fmt.Sprintf("bad environment entry %q", e))
				}
				t.Env = append(t.Env, e)
			}
		case "category":
			if len(args) != 1 {
				return nil, bad("category takes a name")
			}
			t.Category = string(args[0])
		case "cores":
			if len(args) != 1 {
				return nil, bad("cores takes a number")
			}
			v, err := strconv.ParseFloat(string(args[0]), 64)
			if err != nil || v != v || v < 0 || v > 1e9 {
				return nil, bad("bad cores")
			}
			t.Cores = v
		case "gpus", "memory", "disk", "end_time", "wall_time":
			if len(args) != 1 {
				return nil, bad(kw + " takes a number")
			}
			v, err := atoi(args[0])
			if err != nil || v < 0 {
				return nil, bad("bad " + kw)
			}
			switch kw {
			case "gpus":
				t.GPUs = v
			case "memory":
				t.MemoryMB = v
			case "disk":
				t.DiskMB = v
			case "end_time":
				t.EndTime = v
			case "wall_time":
				t.WallTime = v
			}
		case "infile", "outfile":
			if len(args) != 3 {
				return nil, bad(kw + " takes a cache name, a name and flags")
			}
			cn, err1 := DecodeName(string(args[0]))
			rn, err2 := DecodeName(string(args[1]))
			flags, err3 := atoi(args[2])
			if err1 != nil || err2 != nil || err3 != nil || flags < 0 || flags > 1<<20 {
				return nil, bad("bad " + kw)
			}
			if err := CheckCacheName(cn); err != nil {
				return nil, fmt.Errorf("task %d: %w", id, err)
			}
			if err := CheckRelativePath(rn); err != nil {
				return nil, fmt.Errorf("task %d: %w", id, err)
			}
			tf := TaskFile{CacheName: cn, Remote: rn, Flags: int(flags)}
			if kw == "infile" {
				t.Inputs = append(t.Inputs, tf)
			} else {
				t.Outputs = append(t.Outputs, tf)
			}
		case "dir":
			if len(args) != 1 {
				return nil, bad("dir takes a name")
			}
			rn, err := DecodeName(string(args[0]))
			if err != nil {
				return nil, bad("bad dir name")
			}
			if err := CheckRelativePath(rn); err != nil {
				return nil, fmt.Errorf("task %d: %w", id, err)
			}
			t.EmptyDirs = append(t.EmptyDirs, rn)
		default:
			return nil, bad("unknown task field")
		}
	}
}

// AppendTask appends the whole task description, "task ID" to "end", in the
// order and format Debian's CCTools master uses.
func AppendTask(b []byte, t *TaskSpec) []byte {
	b = Task{ID: t.ID}.AppendTo(b)
	b = appendInt(append(b, "cmd "...), int64(len(t.Command)))
	b = append(append(b, '\n'), t.Command...)
	if t.Coprocess != "" {
		b = appendInt(append(b, "coprocess "...), int64(len(t.Coprocess)))
		b = append(append(b, '\n'), t.Coprocess...)
	}
	cat := t.Category
	if cat == "" {
		cat = "default"
	}
	b = append(append(append(b, "category "...), token(cat)...), '\n')
	if t.Cores >= 0 {
		b = append(strconv.AppendFloat(append(b, "cores "...), t.Cores, 'f', 3, 64), '\n')
	}
	for _, r := range []struct {
		kw string
		v  int64
	}{{"gpus", t.GPUs}, {"memory", t.MemoryMB}, {"disk", t.DiskMB}} {
		if r.v >= 0 {
			b = append(appendInt(append(append(b, r.kw...), ' '), r.v), '\n')
		}
	}
	if t.EndTime > 0 {
		b = append(appendInt(append(b, "end_time "...), t.EndTime), '\n')
	}
	if t.WallTime > 0 {
		b = append(appendInt(append(b, "wall_time "...), t.WallTime), '\n')
	}
	for _, e := range t.Env {
		b = appendInt(append(b, "env "...), int64(len(e)))
		b = append(append(append(b, '\n'), e...), '\n')
	}
	for _, f := range t.Inputs {
		b = appendTaskFile(b, "infile ", f)
	}
	for _, d := range t.EmptyDirs {
		b = append(appendName(append(b, "dir "...), d), '\n')
	}
	for _, f := range t.Outputs {
		b = appendTaskFile(b, "outfile ", f)
	}
	return End{}.AppendTo(b)
}

func appendTaskFile(b []byte, kw string, f TaskFile) []byte {
	b = appendName(append(b, kw...), f.CacheName)
	b = appendName(append(b, ' '), f.Remote)
	b = append(b, ' ')
	return append(appendInt(b, int64(f.Flags)), '\n')
}

// SendTask writes a whole task description.
func (c *Conn) SendTask(t *TaskSpec) error {
	c.wbuf = AppendTask(c.wbuf[:0], t)
	_, err := c.w.Write(c.wbuf)
	return err
}
