package funcs

import "context"

// A Label names the cell that a call computes, for the line that a crashing
// shared-library function leaves before the process exits (see
// [Registry.OpenPair]). An engine makes one per goroutine, passes the
// context from [WithLabel] to its calls, and sets the label before each;
// setting it costs two stores. Calls of the other kinds ignore it. Without
// a label, a crash names the call's input files, if it has them.
type Label struct {
	x, y int
	set  bool
}

// SetCell labels the next calls as computing cell (x,y).
func (l *Label) SetCell(x, y int) { l.x, l.y, l.set = x, y, true }

type labelKey struct{}

// WithLabel returns a context that labels the calls made with it by l.
func WithLabel(ctx context.Context, l *Label) context.Context {
	return context.WithValue(ctx, labelKey{}, l)
}

// labelOf returns the label of the calls made with ctx: a copy, as the
// caller may relabel while a timed-out call goes on.
func labelOf(ctx context.Context) Label {
	if l, ok := ctx.Value(labelKey{}).(*Label); ok {
		return *l
	}
	return Label{}
}
