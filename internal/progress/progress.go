// Package progress draws a one-line progress bar (done/total, rate, ETA and a
// free-form status) on a terminal.
//
// A Bar does nothing unless its writer is a terminal, so commands can create
// one unconditionally: when output goes to a file or a pipe, nothing extra is
// printed. It is not a logger and keeps no history.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"
)

// Bar is a progress bar. Add and SetStatus are cheap and safe to call from
// many goroutines; drawing happens on its own goroutine a few times a second.
// The zero value is not usable; call New.
type Bar struct {
	w        io.Writer
	fd       int
	unit     string
	interval time.Duration
	start    time.Time

	done  atomic.Int64
	total atomic.Int64

	mu     sync.Mutex // serialises drawing and writes through Writer
	status string
	drawn  bool    // a bar line is on the screen
	rate   float64 // smoothed units per second
	last   int64   // done at the previous tick
	lastAt time.Time

	stop chan struct{}
	wg   sync.WaitGroup
}

// New returns a Bar that draws on w if w is a terminal, counting total units
// named unit (e.g. "cells"). If w is not a terminal the Bar is inert.
func New(w io.Writer, unit string, total int64) *Bar {
	b := &Bar{w: w, fd: -1, unit: unit, interval: 200 * time.Millisecond, start: time.Now()}
	b.total.Store(total)
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		b.fd = int(f.Fd())
		b.lastAt = b.start
		b.stop = make(chan struct{})
		b.wg.Add(1)
		go b.loop()
	}
	return b
}

// Active reports whether the bar is drawing.
func (b *Bar) Active() bool { return b.fd >= 0 }

// Add records n more units done.
func (b *Bar) Add(n int64) { b.done.Add(n) }

// SetDone sets the number of units done.
func (b *Bar) SetDone(n int64) { b.done.Store(n) }

// SetTotal changes the number of units expected.
func (b *Bar) SetTotal(n int64) { b.total.Store(n) }

// SetStatus sets a short text shown after the rate and ETA, such as
// "running 2, failed 1".
func (b *Bar) SetStatus(s string) {
	if !b.Active() {
		return
	}
	b.mu.Lock()
	b.status = s
	b.mu.Unlock()
}

// Stop erases the bar and stops drawing. It is safe to call more than once.
func (b *Bar) Stop() {
	if !b.Active() {
		return
	}
	select {
	case <-b.stop:
		return
	default:
		close(b.stop)
	}
	b.wg.Wait()
	b.mu.Lock()
	b.clear()
	b.mu.Unlock()
}

// Writer returns a writer for text that shares the bar's terminal: each write
// erases the bar first, and the bar is redrawn on the next tick. Use it for
// messages (and results, when they go to the same terminal) so that they do
// not interleave with the bar.
func (b *Bar) Writer(w io.Writer) io.Writer {
	if !b.Active() {
		return w
	}
	return &barWriter{b: b, w: w}
}

type barWriter struct {
	b *Bar
	w io.Writer
}

func (bw *barWriter) Write(p []byte) (int, error) {
	bw.b.mu.Lock()
	defer bw.b.mu.Unlock()
	bw.b.clear()
	return bw.w.Write(p)
}

func (b *Bar) loop() {
	defer b.wg.Done()
	t := time.NewTicker(b.interval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case now := <-t.C:
			b.mu.Lock()
			b.draw(now)
			b.mu.Unlock()
		}
	}
}

// clear erases the bar line; b.mu must be held.
func (b *Bar) clear() {
	if b.drawn {
		io.WriteString(b.w, "\r\033[K")
		b.drawn = false
	}
}

// draw renders the bar; b.mu must be held.
func (b *Bar) draw(now time.Time) {
	done, total := b.done.Load(), b.total.Load()
	if dt := now.Sub(b.lastAt).Seconds(); dt > 0 {
		inst := float64(done-b.last) / dt
		if b.rate == 0 {
			b.rate = inst
		} else {
			// Smooth over roughly the last few seconds so that the ETA
			// follows changes in speed without jumping at every tick.
			b.rate = 0.85*b.rate + 0.15*inst
		}
		b.last, b.lastAt = done, now
	}
	width := 80
	if w, _, err := term.GetSize(b.fd); err == nil && w > 20 {
		width = w
	}
	line := Format(done, total, b.unit, b.rate, now.Sub(b.start), b.status, width)
	io.WriteString(b.w, "\r"+line+"\033[K")
	b.drawn = true
}

// Format renders one bar line of at most width columns. It is exported for
// tests and for tools that print progress to logs instead of a terminal.
func Format(done, total int64, unit string, rate float64, elapsed time.Duration, status string, width int) string {
	var text strings.Builder
	if total > 0 {
		fmt.Fprintf(&text, " %d/%d %s %5.1f%%", done, total, unit, 100*float64(done)/float64(total))
	} else {
		fmt.Fprintf(&text, " %d %s", done, unit)
	}
	fmt.Fprintf(&text, " %s %s/s", humanRate(rate), unit)
	switch {
	case total > 0 && done >= total:
		fmt.Fprintf(&text, " in %s", roundDuration(elapsed))
	case total > 0 && rate > 0:
		eta := time.Duration(float64(total-done) / rate * float64(time.Second))
		fmt.Fprintf(&text, " ETA %s", roundDuration(eta))
	default:
		text.WriteString(" ETA -")
	}
	if status != "" {
		text.WriteString("  " + status)
	}
	tail := text.String()
	barWidth := width - len(tail) - 3
	if barWidth > 40 {
		barWidth = 40
	}
	if barWidth < 5 || total <= 0 {
		if len(tail) > width-1 {
			tail = tail[:width-1]
		}
		return strings.TrimPrefix(tail, " ")
	}
	filled := int(float64(barWidth) * float64(done) / float64(total))
	filled = min(max(filled, 0), barWidth)
	return "[" + strings.Repeat("=", filled) + strings.Repeat(" ", barWidth-filled) + "]" + tail
}

func humanRate(r float64) string {
	switch {
	case r >= 1e6:
		return fmt.Sprintf("%.1fM", r/1e6)
	case r >= 1e4:
		return fmt.Sprintf("%.1fk", r/1e3)
	case r >= 10:
		return fmt.Sprintf("%.0f", r)
	default:
		return fmt.Sprintf("%.2f", r)
	}
}

func roundDuration(d time.Duration) time.Duration {
	switch {
	case d > time.Hour:
		return d.Round(time.Minute)
	case d > time.Minute:
		return d.Round(time.Second)
	default:
		return d.Round(100 * time.Millisecond)
	}
}
