package makeflow

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"golang.org/x/sys/unix"
)

// The rule-cost file keeps RuleCosts from run to run, for every workflow
// the user runs, so it grows with every distinct rule ever run: 100,000
// after a few large workflows. A run reads and writes it in time that
// grows with its own workflow, not with the file: a header, then records
// of costRecord bytes sorted by key,
//
//	key      12 bytes  RuleKey, undecoded
//	runs     uint32    little-endian, as all numbers
//	seconds  float64   IEEE 754 bits
//	last     int64     µs since the epoch
//
// LoadRuleCosts maps the file and finds the workflow's rules by binary
// search. Save writes over their records in place when the file has them
// all (a workflow run again), and otherwise merges what it holds into the
// sorted records and replaces the file in one rename. The file never
// shrinks in place, so a mapping of it stays whole; a reader may see one
// record half written, which costs one rule's prediction. (The JSON map it
// replaces took 0.4 s to read and write at 100,000 rules, on every run of
// any size.)
const (
	costHeader = "rightsize rule costs v1\n"
	costKeyLen = 12
	costRecord = costKeyLen + 4 + 8 + 8
)

type costKey [costKeyLen]byte

// decodeCostKey returns the key RuleKey gave as text, or false for text
// that is not one.
func decodeCostKey(s string) (costKey, bool) {
	var k costKey
	if len(s) != 2*costKeyLen {
		return k, false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return k, false // RuleKey writes lower case: one key, one text
		}
	}
	hex.Decode(k[:], []byte(s))
	return k, true
}

func putCostRecord(b []byte, k costKey, c RuleCost) {
	copy(b, k[:])
	binary.LittleEndian.PutUint32(b[costKeyLen:], uint32(min(max(c.Runs, 0), math.MaxUint32)))
	binary.LittleEndian.PutUint64(b[costKeyLen+4:], math.Float64bits(c.Seconds))
	binary.LittleEndian.PutUint64(b[costKeyLen+12:], uint64(c.Last))
}

func costRecordAt(b []byte) RuleCost {
	return RuleCost{
		Runs:    int(binary.LittleEndian.Uint32(b[costKeyLen:])),
		Seconds: math.Float64frombits(binary.LittleEndian.Uint64(b[costKeyLen+4:])),
		Last:    int64(binary.LittleEndian.Uint64(b[costKeyLen+12:])),
	}
}

// costFile is a rule-cost file in memory.
type costFile struct {
	data    []byte // the whole file, nil if empty
	records []byte // data after the header
	mapped  bool   // data is a mapping of the file
}

// costFileMode says how openCostFile has the file in memory.
type costFileMode int

const (
	costRead    costFileMode = iota // mapped, read-only: a few pages are looked at
	costWrite                       // mapped, shared and writable: records change in place
	costReadAll                     // read whole: every record is looked at
)

// openCostFile has the rule-cost file at path in memory. A missing file is
// an empty one; so is one that is not a rule-cost file, or is cut short
// (it is replaced at the next Save).
func openCostFile(path string, mode costFileMode) (*costFile, error) {
	flag := os.O_RDONLY
	if mode == costWrite {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(path, flag, 0)
	if os.IsNotExist(err) {
		return &costFile{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size < int64(len(costHeader)) || (size-int64(len(costHeader)))%costRecord != 0 || size > math.MaxInt32*costRecord {
		return &costFile{}, nil
	}
	cf := &costFile{}
	switch mode {
	case costReadAll:
		// One read: faulting in a mapping page by page costs more.
		cf.data = make([]byte, size)
		if _, err := io.ReadFull(f, cf.data); err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
	default:
		prot := unix.PROT_READ
		if mode == costWrite {
			prot |= unix.PROT_WRITE
		}
		if cf.data, err = unix.Mmap(int(f.Fd()), 0, int(size), prot, unix.MAP_SHARED); err != nil {
			return nil, fmt.Errorf("map %s: %w", path, err)
		}
		cf.mapped = true
	}
	if string(cf.data[:len(costHeader)]) != costHeader {
		cf.close()
		return &costFile{}, nil
	}
	cf.records = cf.data[len(costHeader):]
	return cf, nil
}

func (cf *costFile) close() {
	if cf.mapped {
		unix.Munmap(cf.data)
	}
	*cf = costFile{}
}

func (cf *costFile) len() int { return len(cf.records) / costRecord }

func (cf *costFile) key(i int) []byte {
	return cf.records[i*costRecord : i*costRecord+costKeyLen]
}

// index returns the position of k's record, or -1 if the file has none.
func (cf *costFile) index(k costKey) int {
	i := sort.Search(cf.len(), func(i int) bool { return bytes.Compare(cf.key(i), k[:]) >= 0 })
	if i < cf.len() && bytes.Equal(cf.key(i), k[:]) {
		return i
	}
	return -1
}

// find returns the record of k, if the file has one.
func (cf *costFile) find(k costKey) (RuleCost, bool) {
	if i := cf.index(k); i >= 0 {
		return costRecordAt(cf.records[i*costRecord:]), true
	}
	return RuleCost{}, false
}

// sorted reports whether the records are in strictly increasing key order,
// which find and Save's merge rely on.
func (cf *costFile) sorted() bool {
	for i := 1; i < cf.len(); i++ {
		if bytes.Compare(cf.key(i-1), cf.key(i)) >= 0 {
			return false
		}
	}
	return true
}

// LoadRuleCosts reads from the rule-cost file at path what is known of
// the rules of w. A missing or damaged file holds nothing.
func LoadRuleCosts(path string, w *Workflow) RuleCosts {
	c := RuleCosts{}
	cf, err := openCostFile(path, costRead)
	if err != nil {
		return c
	}
	defer cf.close()
	if cf.len() == 0 {
		return c
	}
	for _, r := range w.Rules {
		name := RuleKey(r)
		if _, ok := c[name]; ok {
			continue
		}
		k, _ := decodeCostKey(name)
		if v, ok := cf.find(k); ok {
			c[name] = v
		}
	}
	return c
}

// A costEntry is one rule's cost, to be saved.
type costEntry struct {
	k costKey
	c RuleCost
}

// Save writes c into the rule-cost file at path: its costs replace those
// the file holds for the same rules, and the file keeps the others. Keys
// that RuleKey cannot have made are not kept.
func (c RuleCosts) Save(path string) error {
	type entry = costEntry
	news := make([]entry, 0, len(c))
	for name, v := range c {
		if k, ok := decodeCostKey(name); ok {
			news = append(news, entry{k, v})
		}
	}
	slices.SortFunc(news, func(a, b entry) int { return bytes.Compare(a.k[:], b.k[:]) })
	if updateCostsInPlace(path, news) {
		return nil
	}

	old, err := openCostFile(path, costReadAll)
	if err != nil {
		return fmt.Errorf("rule costs: %w", err)
	}
	defer old.close()
	if !old.sorted() {
		old.close() // damaged: what it holds cannot be merged
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("rule costs: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".rules-*")
	if err != nil {
		return fmt.Errorf("rule costs: %w", err)
	}
	bw := bufio.NewWriterSize(tmp, 64<<10)
	bw.WriteString(costHeader)
	var rec [costRecord]byte
	i, n := 0, old.len()
	for _, e := range news {
		for ; i < n && bytes.Compare(old.key(i), e.k[:]) < 0; i++ {
			bw.Write(old.records[i*costRecord : (i+1)*costRecord])
		}
		if i < n && bytes.Equal(old.key(i), e.k[:]) {
			i++
		}
		putCostRecord(rec[:], e.k, e.c)
		bw.Write(rec[:])
	}
	if i < n {
		bw.Write(old.records[i*costRecord:])
	}
	err = bw.Flush()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("rule costs: %w", err)
	}
	return nil
}

// updateCostsInPlace writes news over their records in the rule-cost file
// at path and reports true if the file has a record for every one of them;
// otherwise it changes nothing and reports false.
func updateCostsInPlace(path string, news []costEntry) bool {
	cf, err := openCostFile(path, costWrite)
	if err != nil || cf.len() == 0 {
		return false
	}
	defer cf.close()
	at := make([]int, len(news))
	for i, e := range news {
		if at[i] = cf.index(e.k); at[i] < 0 {
			return false
		}
	}
	for i, e := range news {
		putCostRecord(cf.records[at[i]*costRecord:], e.k, e.c)
	}
	return true
}
