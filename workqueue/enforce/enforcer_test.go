package enforce

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// ev is one event of a TestEnforcer script, at a logical time, and the
// actions it must answer ("release 2", "drain 3 back", …).
type ev struct {
	at   time.Duration
	do   func(e *Enforcer, now time.Time) []Action
	want []string
}

func decided(byPool map[string]int) func(*Enforcer, time.Time) []Action {
	return func(e *Enforcer, now time.Time) []Action { return e.DecidedQuotas(quotas(byPool), now) }
}

// quotas is byPool, the workers each pool gives, as the quotas of pools
// whose workers count one each.
func quotas(byPool map[string]int) map[string]Quota {
	if byPool == nil {
		return nil
	}
	out := make(map[string]Quota, len(byPool))
	for pool, n := range byPool {
		out[pool] = Quota{Workers: n}
	}
	return out
}

func joined(id int, pool, key string, holds int) func(*Enforcer, time.Time) []Action {
	return func(e *Enforcer, now time.Time) []Action {
		return e.Joined(Joining{ID: id, Pool: pool, Key: key, Holds: holds}, now)
	}
}

func holds(id, n int) func(*Enforcer, time.Time) []Action {
	return func(e *Enforcer, now time.Time) []Action { return e.Holds(id, n, now) }
}

func left(id int) func(*Enforcer, time.Time) []Action {
	return func(e *Enforcer, now time.Time) []Action { return e.Left(id, now) }
}

func describe(acts []Action) []string {
	var out []string
	for _, a := range acts {
		s := fmt.Sprintf("%v %d", a.Verb, a.Worker)
		if a.Back {
			s += " back"
		}
		out = append(out, s)
	}
	return out
}

// TestEnforcer drives the master's enforcement on logical time: workers
// beyond a decision are drained at once and released the moment their
// last task is done, never before; a released worker that comes straight
// back is kept drained instead of released again.
func TestEnforcer(t *testing.T) {
	const remember = time.Minute
	for _, tc := range []struct {
		name   string
		events []ev
	}{
		{"released as its last task is done", []ev{
			{0, joined(1, "p", "w1", 1), nil},
			{0, joined(2, "p", "w2", 0), nil},
			{0, joined(3, "p", "w3", 2), nil},
			// Two beyond a decision of 1: the idle one goes at once,
			// the one with fewest tasks is drained.
			{time.Second, decided(map[string]int{"p": 1}), []string{"drain 1", "release 2"}},
			{2 * time.Second, holds(1, 1), nil},
			{3 * time.Second, holds(1, 0), []string{"release 1"}},
			{4 * time.Second, holds(3, 0), nil}, // within the decision
			{5 * time.Second, left(2), nil},     // already released
		}},
		{"never mid-task", []ev{
			{0, joined(1, "p", "w1", 3), nil},
			{0, decided(map[string]int{"p": 0}), []string{"drain 1"}},
			{time.Second, holds(1, 2), nil},
			{2 * time.Second, holds(1, 1), nil},
			{3 * time.Second, decided(map[string]int{"p": 0}), nil},
			{4 * time.Second, holds(1, 0), []string{"release 1"}},
		}},
		{"room again: undrained", []ev{
			{0, joined(1, "p", "w1", 1), nil},
			{0, joined(2, "p", "w2", 1), nil},
			{0, decided(map[string]int{"p": 1}), []string{"drain 2"}},
			{time.Second, left(1), []string{"undrain 2"}},
			{2 * time.Second, decided(map[string]int{"p": 0}), []string{"drain 2"}},
			{3 * time.Second, decided(nil), []string{"undrain 2"}}, // the pool's record is gone
		}},
		{"a worker that comes straight back is kept drained", []ev{
			{0, decided(map[string]int{"p": 1}), nil},
			{0, joined(1, "p", "w1", 1), nil},
			{time.Second, joined(2, "p", "w2", 0), []string{"release 2"}},
			// CCTools' worker reconnects at once, on a new connection.
			{2 * time.Second, joined(3, "p", "w2", 0), []string{"drain 3 back"}},
			{3 * time.Second, holds(1, 0), nil},
			// Room: it takes tasks. Beyond the decision again, an idle
			// worker that follows the pool goes first; then it is
			// drained, not released.
			{4 * time.Second, decided(map[string]int{"p": 2}), []string{"undrain 3 back"}},
			{5 * time.Second, holds(3, 1), nil},
			{6 * time.Second, decided(map[string]int{"p": 1}), []string{"release 1"}},
			{7 * time.Second, decided(map[string]int{"p": 0}), []string{"drain 3 back"}},
			{8 * time.Second, holds(3, 0), nil},
			{9 * time.Second, left(3), nil}, // its idle timeout
		}},
		{"remembered for a window only", []ev{
			{0, decided(map[string]int{"p": 0}), nil},
			{0, joined(1, "p", "w1", 0), []string{"release 1"}},
			{remember, joined(2, "p", "w1", 0), []string{"release 2"}},
			{remember + time.Second, joined(3, "p", "w1", 0), []string{"drain 3 back"}},
		}},
		{"a worker without a key is not remembered", []ev{
			{0, decided(map[string]int{"p": 0}), nil},
			{0, joined(1, "p", "", 0), []string{"release 1"}},
			{time.Second, joined(2, "p", "", 0), []string{"release 2"}},
		}},
		{"other pools and none", []ev{
			{0, decided(map[string]int{"p": 1}), nil},
			{0, joined(1, "q", "w1", 0), nil},
			{0, joined(2, "", "w2", 0), nil},
			{0, joined(3, "p", "w3", 0), nil},
			{time.Second, joined(4, "p", "w4", 0), []string{"release 4"}},
			{2 * time.Second, decided(map[string]int{"p": 1, "q": 0}), []string{"release 1"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Unix(1000, 0)
			e := NewEnforcer(remember)
			for i, ev := range tc.events {
				got := describe(ev.do(e, t0.Add(ev.at)))
				if !slices.Equal(got, ev.want) {
					t.Fatalf("event %d at %v: actions [%s], want [%s]", i, ev.at,
						strings.Join(got, ", "), strings.Join(ev.want, ", "))
				}
			}
		})
	}
}

func TestEnforcerActive(t *testing.T) {
	t0 := time.Unix(1000, 0)
	e := NewEnforcer(time.Minute)
	if e.Active() {
		t.Error("active without a decision")
	}
	e.Joined(Joining{ID: 1, Pool: "p", Holds: 1}, t0)
	e.DecidedQuotas(map[string]Quota{"p": {Workers: 0}}, t0)
	if !e.Active() || e.Draining() != 1 {
		t.Errorf("active %v, draining %d; want true, 1", e.Active(), e.Draining())
	}
	e.DecidedQuotas(nil, t0)
	if e.Active() || e.Draining() != 0 {
		t.Errorf("without decisions: active %v, draining %d; want false, 0", e.Active(), e.Draining())
	}
}
