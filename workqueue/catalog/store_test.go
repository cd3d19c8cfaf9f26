package catalog

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestStoreStanding drives the store with logical time: which records a
// full catalog keeps and which it drops. Unless a step says otherwise, a
// record is 100 bytes and each key comes from an address of its own
// subnet.
func TestStoreStanding(t *testing.T) {
	type step struct {
		at     time.Duration
		key    string
		source string // default: one of its own per key
		tcp    bool
		size   int // default 100
		want   outcome
	}
	once := func(at time.Duration, keys ...string) []step {
		var out []step
		for _, k := range keys {
			out = append(out, step{at: at, key: k})
		}
		return out
	}
	tests := []struct {
		name                     string
		perSource, perSubnet, of int // limits; perSubnet 0: the total
		steps                    [][]step
		kept                     []string
	}{
		{
			name:  "a new record replaces the oldest heard once",
			of:    300,
			steps: [][]step{once(0, "a", "b", "c", "d")},
			kept:  []string{"b", "c", "d"},
		},
		{
			name:  "a refreshed record outlives a flood of records heard once",
			of:    300,
			steps: [][]step{once(0, "a"), once(2*time.Second, "a"), once(3*time.Second, "f1", "f2", "f3", "f4", "f5", "f6", "f7")},
			kept:  []string{"a", "f6", "f7"},
		},
		{
			name:  "copies within a second of the first update count once",
			of:    300,
			steps: [][]step{once(0, "a"), once(time.Second/2, "a"), once(time.Second, "f1", "f2", "f3")},
			kept:  []string{"f1", "f2", "f3"},
		},
		{
			name: "when all are refreshed, a new record over UDP is dropped",
			of:   300,
			steps: [][]step{once(0, "a", "b", "c"), once(2*time.Second, "a", "b", "c"),
				{{at: 3 * time.Second, key: "d", want: droppedFull}}},
			kept: []string{"a", "b", "c"},
		},
		{
			name: "a new record over TCP replaces the refreshed record first heard last",
			of:   300,
			steps: [][]step{once(0, "a"), once(10*time.Second, "b"), once(20*time.Second, "c"),
				once(30*time.Second, "c", "a", "b"), {{at: 40 * time.Second, key: "d", tcp: true}}},
			kept: []string{"a", "b", "d"},
		},
		{
			name: "records over TCP are not replaced by others' over TCP",
			of:   300,
			steps: [][]step{{{key: "a", tcp: true}, {key: "b", tcp: true}, {key: "c", tcp: true},
				{key: "d", tcp: true, want: droppedFull}, {key: "e", want: droppedFull}}},
			kept: []string{"a", "b", "c"},
		},
		{
			name:  "a record heard over TCP is not updated over UDP",
			of:    300,
			steps: [][]step{{{key: "a", tcp: true}, {at: 5 * time.Second, key: "a", want: droppedOverTCP}, {at: 6 * time.Second, key: "a", tcp: true}}},
			kept:  []string{"a"},
		},
		{
			name:      "new records sent from a master's address replace only records heard once",
			perSource: 2, of: 1000,
			steps: [][]step{{{key: "m", source: "10.0.0.1"}, {at: 2 * time.Second, key: "m", source: "10.0.0.1"},
				{at: 3 * time.Second, key: "f1", source: "10.0.0.1"}, {at: 3 * time.Second, key: "f2", source: "10.0.0.1"},
				{at: 3 * time.Second, key: "f3", source: "10.0.0.1"}}},
			kept: []string{"f3", "m"},
		},
		{
			name:      "one /24 holds at most its share",
			perSubnet: 200, of: 1000,
			steps: [][]step{{{key: "a", source: "10.0.0.1"}, {key: "b", source: "10.0.0.2"}, {key: "c", source: "10.0.0.3"},
				{key: "x", source: "10.0.1.1"}, {key: "y", source: "10.0.1.2"}}},
			kept: []string{"b", "c", "x", "y"},
		},
		{
			name:      "a subnet full of refreshed records takes no new one; others do",
			perSubnet: 200, of: 1000,
			steps: [][]step{{{key: "a", source: "10.0.0.1"}, {key: "b", source: "10.0.0.2"},
				{at: 2 * time.Second, key: "a", source: "10.0.0.1"}, {at: 2 * time.Second, key: "b", source: "10.0.0.2"},
				{at: 3 * time.Second, key: "c", source: "10.0.0.3", want: droppedFull}, {at: 3 * time.Second, key: "x", source: "10.0.1.1"}}},
			kept: []string{"a", "b", "x"},
		},
		{
			name: "IPv6 sources share a /64",
			of:   1000, perSubnet: 200,
			steps: [][]step{{{key: "a", source: "2001:db8::1"}, {key: "b", source: "2001:db8::2"}, {key: "c", source: "2001:db8::3"}, {key: "d", source: "2001:db8:0:1::1"}}},
			kept:  []string{"b", "c", "d"},
		},
		{
			name:      "a record that fails the total after its address's limit displaces nothing",
			perSource: 1, of: 300,
			steps: [][]step{{{key: "a", source: "10.0.0.1"}, {key: "b"}, {key: "c"}, {at: 2 * time.Second, key: "b"}, {at: 2 * time.Second, key: "c"},
				{at: 3 * time.Second, key: "x", source: "10.0.0.1", size: 250, want: droppedFull}}},
			kept: []string{"a", "b", "c"},
		},
		{
			name:      "a record larger than its subnet's share displaces nothing",
			perSubnet: 200, of: 1000,
			steps: [][]step{{{key: "a", source: "10.0.0.1"}, {key: "x", source: "10.0.0.2", size: 250, want: droppedFull}}},
			kept:  []string{"a"},
		},
		{
			name:      "a record that fails the total after its subnet's limit displaces nothing",
			perSubnet: 200, of: 300,
			steps: [][]step{{{key: "a", source: "10.0.0.1"}, {key: "b"}, {key: "c"}, {at: 2 * time.Second, key: "b"}, {at: 2 * time.Second, key: "c"},
				{at: 3 * time.Second, key: "x", source: "10.0.0.2", size: 150, want: droppedFull}}},
			kept: []string{"a", "b", "c"},
		},
		{
			name: "a record over TCP replaces as many refreshed records as it needs, first heard last first",
			of:   400,
			steps: [][]step{once(0, "a"), once(10*time.Second, "b"), once(20*time.Second, "c"), once(30*time.Second, "d"),
				once(40*time.Second, "c", "a", "d", "b"), {{at: 50 * time.Second, key: "e", tcp: true, size: 200}}},
			kept: []string{"a", "b", "e"},
		},
		{
			name:      "a record over TCP at its address's limit replaces that record and the next first heard last",
			perSource: 1, of: 300,
			steps: [][]step{once(0, "b"), once(10*time.Second, "c"), {{at: 20 * time.Second, key: "a", source: "10.0.0.1"}},
				once(30*time.Second, "b", "c"), {{at: 30 * time.Second, key: "a", source: "10.0.0.1"}},
				{{at: 40 * time.Second, key: "x", source: "10.0.0.1", tcp: true, size: 200}}},
			kept: []string{"b", "x"},
		},
	}
	base := time.Unix(1_800_000_000, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			perSource, perSubnet := tt.perSource, tt.perSubnet
			if perSource == 0 {
				perSource = 100
			}
			if perSubnet == 0 {
				perSubnet = tt.of
			}
			s := newStore(perSource, perSubnet, tt.of)
			sources := map[string]string{}
			for _, steps := range tt.steps {
				for _, st := range steps {
					src := st.source
					if src == "" {
						if sources[st.key] == "" {
							sources[st.key] = fmt.Sprintf("10.%d.0.1", len(sources)+1)
						}
						src = sources[st.key]
					}
					now := base.Add(st.at)
					size := st.size
					if size == 0 {
						size = 100
					}
					js := make([]byte, size)
					if got := s.put(st.key, Record{}, js, len(js), src, st.tcp, now, now.Add(time.Hour)); got != st.want {
						t.Errorf("put %s at %v: outcome %d, want %d", st.key, st.at, got, st.want)
					}
				}
			}
			var kept []string
			for k := range s.records {
				kept = append(kept, k)
			}
			slices.Sort(kept)
			if !slices.Equal(kept, tt.kept) {
				t.Errorf("kept %v, want %v", kept, tt.kept)
			}
			checkStore(t, s)
		})
	}
}

// checkStore checks that the store's indexes agree with its records.
func checkStore(t *testing.T, s *store) {
	t.Helper()
	total, once, refreshedN := 0, 0, 0
	subnetBytes := map[string]int{}
	for k, e := range s.records {
		if e.key != k || s.bySource[e.source][k] != e {
			t.Errorf("record %s not indexed by its key and source", k)
		}
		total += e.size
		subnetBytes[e.subnet] += e.size
		switch e.standing {
		case heardOnce:
			once++
		case refreshed:
			refreshedN++
			if s.refresh[e.index] != e {
				t.Errorf("record %s not at its heap index", k)
			}
		}
	}
	if total != s.total || once != s.once.Len() || refreshedN != len(s.refresh) {
		t.Errorf("total %d, once %d, refreshed %d; store says %d, %d, %d", total, once, refreshedN, s.total, s.once.Len(), len(s.refresh))
	}
	for net, sn := range s.bySubnet {
		if sn.bytes != subnetBytes[net] {
			t.Errorf("subnet %s: %d bytes, store says %d", net, subnetBytes[net], sn.bytes)
		}
	}
}

// TestStoreFloodKeepsIndexes: a long run of updates (new, repeated, over
// TCP, expiring) leaves the indexes consistent and within the limits.
func TestStoreFloodKeepsIndexes(t *testing.T) {
	s := newStore(5, 2000, 5000)
	base := time.Unix(1_800_000_000, 0)
	for i := range 20000 {
		now := base.Add(time.Duration(i) * 100 * time.Millisecond)
		key := fmt.Sprint(i * 7919 % 300)
		src := fmt.Sprintf("10.0.%d.%d", i%3, i%7)
		js := make([]byte, 50+i%150)
		s.put(key, Record{}, js, len(js), src, i%11 == 0, now, now.Add(time.Duration(i%50)*time.Second))
		if i%1000 == 0 {
			s.sweep(now)
		}
		if s.total > 5000 {
			t.Fatalf("update %d: %d bytes held, limit 5000", i, s.total)
		}
		for net, sn := range s.bySubnet {
			if sn.bytes > 2000 {
				t.Fatalf("update %d: subnet %s holds %d bytes, limit 2000", i, net, sn.bytes)
			}
		}
	}
	checkStore(t, s)
	if len(s.records) == 0 {
		t.Error("no records kept")
	}
}
