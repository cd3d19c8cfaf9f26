package catalog

// The limits count the memory a record takes, not its JSON: a record is
// held twice, as the JSON queries answer with and decoded for filters,
// and has a place in the store's indexes, so that it takes from about 2.2
// times its JSON (one long string) to 15 times (a few short fields, or
// many empty ones). Go tells what memory a value takes only of the whole
// heap, so heldBytes estimates it from the sizes of what the record is
// made of, as the runtime allocates them; TestHeldBytesMatchesHeap and
// BenchmarkFullCatalogHeap measure it against the heap (within 11% for
// the shapes they try).

const (
	// entryBytes is what a record takes besides its key, JSON and
	// decoded value: its entry, its places in the store's maps (the map
	// of its source's records, one to a source in a flood from many
	// addresses) and in the queues of records heard once.
	entryBytes = 600
	// mapBytes is a decoded object's map header; a map of up to 8
	// entries adds one group of 8 slots, smallMapBytes; a larger one
	// tables of slots, slotBytes each (a key's and a value's headers and
	// a control byte), at most 7/8 full and grown by doubling.
	mapBytes      = 48
	smallMapBytes = 288
	slotBytes     = 36
	tableBytes    = 64
	// ifaceBytes is an interface's two words, in a slice of values;
	// sliceBytes a slice's header, boxed in the interface that holds it.
	ifaceBytes = 16
	sliceBytes = 24
)

// heldBytes estimates the memory a record under key with JSON js and
// decoded value rec takes in the store.
func heldBytes(key string, rec Record, js []byte) int {
	return entryBytes + allocBytes(len(key)) + allocBytes(len(js)) + valueBytes(map[string]any(rec))
}

// valueBytes estimates the memory the decoded JSON value v takes beyond
// the interface that holds it.
func valueBytes(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := mapBytes
		switch {
		case len(v) == 0:
		case len(v) <= 8:
			n += smallMapBytes
		default:
			slots := 8
			for slots*7/8 < len(v) {
				slots *= 2
			}
			n += tableBytes + slots*slotBytes
		}
		for k, e := range v {
			n += allocBytes(len(k)) + valueBytes(e)
		}
		return n
	case []any:
		n := allocBytes(sliceBytes) + allocBytes(cap(v)*ifaceBytes)
		for _, e := range v {
			n += valueBytes(e)
		}
		return n
	case string:
		// The string's header, boxed, and its bytes.
		return 16 + allocBytes(len(v))
	case float64:
		return 8
	}
	return 0 // nil and booleans are not allocated
}

// allocBytes is what an allocation of n bytes takes: Go rounds small ones
// up to 8 or 16 bytes, larger ones to size classes about 1/8 apart.
func allocBytes(n int) int {
	switch {
	case n <= 0:
		return 0
	case n <= 8:
		return 8
	case n <= 256:
		return (n + 15) &^ 15
	}
	return n + n/16
}
