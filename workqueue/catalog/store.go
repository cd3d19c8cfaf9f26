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
}

// subnet is what the store keeps of one source subnet.
type subnet struct {
	bytes int
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
	total    int // bytes of JSON in records
	seq      uint64
	once     list.List   // heardOnce entries, oldest first
	refresh  youngestTop // refreshed entries, youngest first
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

// put stores rec (whose JSON is js) under key, heard from source at now
// over TCP or UDP and living until expires, replacing records as its
// limits require.
func (s *store) put(key string, rec Record, js []byte, source string, viaTCP bool, now, expires time.Time) outcome {
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
	if old == nil && len(s.bySource[source]) >= s.maxPerSource {
		v := s.sourceVictim(source, st)
		if v == nil {
			return droppedFull
		}
		s.remove(v)
	}
	grow := len(js)
	if old != nil {
		grow -= len(old.json)
	}
	for s.subnetBytes(net)+grow > s.maxPerSubnet {
		sn := s.bySubnet[net]
		if sn == nil {
			return droppedFull
		}
		v := frontExcept(&sn.once, old)
		if v == nil {
			return droppedFull
		}
		s.remove(v)
	}
	for s.total+grow > s.maxTotal {
		v := s.victim(st, old)
		if v == nil {
			return droppedFull
		}
		s.remove(v)
	}
	if old != nil {
		s.remove(old)
	}
	s.seq++
	s.insert(&entry{key: key, rec: rec, json: js, source: source, subnet: net, seq: s.seq, first: first, expires: expires, standing: st})
	return stored
}

// victim returns the record a record of standing st may replace when the
// store is full, never except: the oldest heard once, or for a record over
// TCP, the refreshed record first heard most recently (a flood's before a
// master's that was advertising before the flood began). It returns nil if
// there is none.
func (s *store) victim(st standing, except *entry) *entry {
	if v := frontExcept(&s.once, except); v != nil {
		return v
	}
	if st != overTCP || len(s.refresh) == 0 {
		return nil
	}
	if v := s.refresh[0]; v != except {
		return v
	}
	// except is on top: the next youngest is one of its children.
	var v *entry
	for _, e := range s.refresh[1:min(3, len(s.refresh))] {
		if v == nil || e.first.After(v.first) {
			v = e
		}
	}
	return v
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

// subnetBytes returns the bytes of JSON in the records from net.
func (s *store) subnetBytes(net string) int {
	if sn := s.bySubnet[net]; sn != nil {
		return sn.bytes
	}
	return 0
}

// frontExcept returns the first entry in l that is not except.
func frontExcept(l *list.List, except *entry) *entry {
	for el := l.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*entry); e != except {
			return e
		}
	}
	return nil
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
	sn.bytes += len(e.json)
	s.total += len(e.json)
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
	sn.bytes -= len(e.json)
	s.total -= len(e.json)
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
