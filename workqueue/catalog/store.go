package catalog

import (
	"container/heap"
	"container/list"
	"net/netip"
	"time"
)

// standing is how far a record has shown that its sender is real, and so
// which records it may replace when the catalog is full. The order matters:
// a record may replace only records of lower standing, or records heard
// once when it is itself heard once.
type standing int

const (
	// heardOnce is a record heard over UDP once (or only within
	// refreshGap of its first update): what a flood from spoofed
	// addresses is made of.
	heardOnce standing = iota
	// refreshed is a record heard over UDP again, at least refreshGap
	// after its first update, as a master or pool advertising at its
	// interval is.
	refreshed
	// overTCP is a record heard over TCP, whose sender has shown, by
	// completing the handshake, that it holds the address it sends from.
	overTCP
)

// refreshGap is how long after its first update a record must be heard
// again to count as refreshed: copies of one update sent in a burst (a
// replay, or a sender that repeats itself) count once.
const refreshGap = time.Second

// entry is one record as stored: its JSON is what queries answer.
type entry struct {
	key     string
	rec     Record
	json    []byte
	size    int    // the bytes it counts for against the limits (heldBytes)
	source  string // the address the record was heard from
	subnet  string // source's /24 or /64
	seq     uint64 // when it was last updated, in updates
	first   time.Time
	expires time.Time
	standing

	// While heardOnce: its place in the store's and its subnet's queues
	// of such records, oldest first.
	once, subnetOnce *list.Element
	// While refreshed: its index in the store's heap of such records.
	index int
	// While put chooses the records a new one replaces: chosen.
	doomed bool
}

// subnet is what the store keeps of one source subnet.
type subnet struct {
	bytes int       // the sizes of its records
	once  list.List // its heardOnce entries, oldest first
}

// store holds the records and decides, with no I/O and its clock passed
// in, which to keep when they are more than its limits allow. It is not
// safe for concurrent use.
type store struct {
	maxPerSource, maxPerSubnet, maxTotal int

	records  map[string]*entry
	bySource map[string]map[string]*entry
	bySubnet map[string]*subnet
	total    int // the sizes of the records
	seq      uint64
	once     list.List   // heardOnce entries, oldest first
	refresh  youngestTop // refreshed entries, youngest first
	chosen   []*entry    // room's answer, its array kept to be reused
}

func newStore(maxPerSource, maxPerSubnet, maxTotal int) *store {
	return &store{
		maxPerSource: maxPerSource, maxPerSubnet: maxPerSubnet, maxTotal: maxTotal,
		records:  map[string]*entry{},
		bySource: map[string]map[string]*entry{},
		bySubnet: map[string]*subnet{},
	}
}

// outcome says what put did with an update.
type outcome int

const (
	stored outcome = iota
	// droppedFull: the record did not fit and it outranked no record it
	// could replace.
	droppedFull
	// droppedOverTCP: a UDP update of a record heard over TCP.
	droppedOverTCP
)

// put stores rec (whose JSON is js) under key, counting size bytes against
// the limits, heard from source at now over TCP or UDP and living until
// expires, replacing records as its limits require.
func (s *store) put(key string, rec Record, js []byte, size int, source string, viaTCP bool, now, expires time.Time) outcome {
	old := s.records[key]
	st := heardOnce
	first := now
	switch {
	case viaTCP:
		st = overTCP
	case old == nil:
	case old.standing == overTCP:
		// Anyone can send UDP from the master's address; only a
		// sender that holds it can reach us over TCP.
		return droppedOverTCP
	case old.standing == refreshed || now.Sub(old.first) >= refreshGap:
		st = refreshed
	}
	if old != nil {
		first = old.first
	}
	net := subnetOf(source)
	victims, ok := s.room(source, net, st, old, size)
	if !ok {
		return droppedFull
	}
	for _, v := range victims {
		s.remove(v)
	}
	clear(victims) // kept for the next put: let the removed go
	if old != nil {
		s.remove(old)
	}
	s.seq++
	s.insert(&entry{key: key, rec: rec, json: js, size: size, source: source, subnet: net, seq: s.seq, first: first, expires: expires, standing: st})
	return stored
}

// room returns the records to remove so that a record of standing st and
// size from source, in net, fits in every limit, replacing old (nil for a
// new key), which is not among them. It chooses them all
// before any is removed, and reports false, choosing none, if the record
// cannot fit: a record that fails one limit must not have displaced
// another under an earlier one. Within each limit it takes the records
// the package doc says a new record replaces, in that order: at the
// source's limit its least established (sourceVictim); at the subnet's
// the subnet's oldest heard once; at the total's the oldest heard once,
// then, for a record over TCP, the refreshed ones first heard most
// recently.
func (s *store) room(source, net string, st standing, old *entry, size int) (victims []*entry, ok bool) {
	victims = s.chosen[:0]
	defer func() { s.chosen = victims[:0] }()
	// Chosen records are marked doomed so that the later limits' walks
	// pass over them; the marks are cleared if the record does not fit.
	choose := func(e *entry) {
		e.doomed = true
		victims = append(victims, e)
	}
	fail := func() ([]*entry, bool) {
		for _, v := range victims {
			v.doomed = false
		}
		return nil, false
	}
	if old == nil && len(s.bySource[source]) >= s.maxPerSource {
		v := s.sourceVictim(source, st)
		if v == nil {
			return fail()
		}
		choose(v)
	}
	grow := size
	if old != nil {
		grow -= old.size
	}
	freed := 0 // by the chosen records, all from net until the total's walk
	for _, v := range victims {
		freed += v.size
	}
	if s.subnetBytes(net)-freed+grow > s.maxPerSubnet {
		sn := s.bySubnet[net]
		if sn == nil {
			return fail()
		}
		for el := sn.once.Front(); s.subnetBytes(net)-freed+grow > s.maxPerSubnet; {
			var v *entry
			if v, el = nextFree(el, old); v == nil {
				return fail()
			}
			choose(v)
			freed += v.size
		}
	}
	var young *youngestWalk
	for el := s.once.Front(); s.total-freed+grow > s.maxTotal; {
		var v *entry
		v, el = nextFree(el, old)
		if v == nil && st == overTCP {
			if young == nil {
				young = newYoungestWalk(s.refresh)
			}
			v = young.nextFree(old)
		}
		if v == nil {
			return fail()
		}
		choose(v)
		freed += v.size
	}
	return victims, true
}

// nextFree returns the first entry of the list from el on that is neither
// except nor doomed, and the element after it; nil if there is none.
func nextFree(el *list.Element, except *entry) (*entry, *list.Element) {
	for ; el != nil; el = el.Next() {
		if e := el.Value.(*entry); e != except && !e.doomed {
			return e, el.Next()
		}
	}
	return nil, nil
}

// youngestWalk reads a youngestTop's entries youngest first without
// changing it: frontier is a heap of the indexes that may hold the next
// one (at first the root; once an index is read, its children join).
type youngestWalk struct {
	h        youngestTop
	frontier []int
}

func newYoungestWalk(h youngestTop) *youngestWalk {
	w := &youngestWalk{h: h}
	if len(h) > 0 {
		w.frontier = []int{0}
	}
	return w
}

// nextFree returns the youngest entry not read yet that is neither except
// nor doomed; nil if there is none.
func (w *youngestWalk) nextFree(except *entry) *entry {
	for len(w.frontier) > 0 {
		i := heap.Pop(w).(int)
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < len(w.h) {
				heap.Push(w, c)
			}
		}
		if e := w.h[i]; e != except && !e.doomed {
			return e
		}
	}
	return nil
}

func (w *youngestWalk) Len() int           { return len(w.frontier) }
func (w *youngestWalk) Less(i, j int) bool { return w.h.Less(w.frontier[i], w.frontier[j]) }
func (w *youngestWalk) Swap(i, j int)      { w.frontier[i], w.frontier[j] = w.frontier[j], w.frontier[i] }
func (w *youngestWalk) Push(x any)         { w.frontier = append(w.frontier, x.(int)) }
func (w *youngestWalk) Pop() any {
	i := w.frontier[len(w.frontier)-1]
	w.frontier = w.frontier[:len(w.frontier)-1]
	return i
}

// sourceVictim returns the record of source's that a new one of standing
// st from it may replace: the lowest in standing, of records heard once
// the oldest, of refreshed ones the one first heard most recently, of
// those over TCP the one updated longest ago; nil if there is none a
// record of st may replace.
func (s *store) sourceVictim(source string, st standing) *entry {
	var v *entry
	for _, e := range s.bySource[source] {
		if st != overTCP && e.standing != heardOnce {
			continue
		}
		switch {
		case v == nil || e.standing < v.standing:
			v = e
		case e.standing != v.standing:
		case e.standing == refreshed && e.first.After(v.first):
			v = e
		case e.standing != refreshed && e.seq < v.seq:
			v = e
		}
	}
	return v
}

// subnetBytes returns the sizes of the records from net.
func (s *store) subnetBytes(net string) int {
	if sn := s.bySubnet[net]; sn != nil {
		return sn.bytes
	}
	return 0
}

func (s *store) insert(e *entry) {
	s.records[e.key] = e
	if s.bySource[e.source] == nil {
		s.bySource[e.source] = map[string]*entry{}
	}
	s.bySource[e.source][e.key] = e
	sn := s.bySubnet[e.subnet]
	if sn == nil {
		sn = &subnet{}
		s.bySubnet[e.subnet] = sn
	}
	sn.bytes += e.size
	s.total += e.size
	switch e.standing {
	case heardOnce:
		e.once = s.once.PushBack(e)
		e.subnetOnce = sn.once.PushBack(e)
	case refreshed:
		heap.Push(&s.refresh, e)
	}
}

func (s *store) remove(e *entry) {
	delete(s.records, e.key)
	if keys := s.bySource[e.source]; keys != nil {
		delete(keys, e.key)
		if len(keys) == 0 {
			delete(s.bySource, e.source)
		}
	}
	sn := s.bySubnet[e.subnet]
	sn.bytes -= e.size
	s.total -= e.size
	switch e.standing {
	case heardOnce:
		s.once.Remove(e.once)
		sn.once.Remove(e.subnetOnce)
	case refreshed:
		heap.Remove(&s.refresh, e.index)
	}
	if sn.bytes == 0 && sn.once.Len() == 0 {
		delete(s.bySubnet, e.subnet)
	}
}

// sweep removes the records expired at now.
func (s *store) sweep(now time.Time) {
	for _, e := range s.records {
		if now.After(e.expires) {
			s.remove(e)
		}
	}
}

// subnetOf returns the /24 (IPv4) or /64 (IPv6) of the address host, or
// host itself if it is not an IP address.
func subnetOf(host string) string {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap()
	bits := 64
	if a.Is4() {
		bits = 24
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return host
	}
	return p.String()
}

// youngestTop is a heap of entries with the one first heard most recently
// on top.
type youngestTop []*entry

func (h youngestTop) Len() int           { return len(h) }
func (h youngestTop) Less(i, j int) bool { return h[i].first.After(h[j].first) }
func (h youngestTop) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *youngestTop) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *youngestTop) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}
