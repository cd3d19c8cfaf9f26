package catalog

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ServerConfig configures a catalog server. Zero values mean defaults.
type ServerConfig struct {
	// Addr is where to listen: host:port, with UDP updates and HTTP on port
	// and TCP updates on port+1. Port 0 picks free ports. Default
	// ":9097".
	Addr string
	// Lifetime is how long a record lives without an update (default 30
	// minutes); a record's own "lifetime" field may shorten it.
	Lifetime time.Duration
	// MaxRecord bounds one record, as JSON (default 64 KiB: a CCTools
	// master's record is about 2.4 KB plus 250 bytes per category). Larger
	// updates are dropped.
	MaxRecord int
	// MaxPerSource bounds the records from one address (default 100): a
	// new one beyond it replaces the address's least established record
	// (see the package doc), or is dropped if it would have to replace
	// one more established than itself.
	MaxPerSource int
	// MaxPerSubnet bounds the records from one subnet (/24 for IPv4, /64
	// for IPv6), in bytes of memory as MaxTotal counts them (default a
	// quarter of MaxTotal), so that a sender who can use any address of
	// its own network, spoofed or not, cannot fill the catalog: a new
	// record beyond it replaces the subnet's oldest record heard only
	// once, or is dropped.
	MaxPerSubnet int
	// MaxTotal bounds all records together, in bytes of the memory they
	// take, as estimated from what each is made of: a record is held as
	// JSON and decoded, and indexed, in from 2.2 times its JSON (one long
	// string) to 15 times (a few short fields; 4.5 for a flood's record
	// of 400 bytes). Default 64 MiB, what Query reads, which the records'
	// JSON cannot pass. Beyond it, a new record replaces the least
	// established one it outranks (see the package doc), or is dropped.
	MaxTotal int
	// Logger receives the server's log (default: discarded).
	Logger *slog.Logger
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time
}

// udpReadBuffer is the UDP socket's receive queue asked for, against the
// kernel's default of about 200 KiB, which holds a few hundred datagrams
// (the kernel counts each one's buffer, not its payload).
const udpReadBuffer = 4 << 20

// maxTCPUpdates bounds the TCP updates read at once.
const maxTCPUpdates = 64

// Server is a running catalog server.
type Server struct {
	cfg  ServerConfig
	log  *slog.Logger
	http net.Listener
	udp  net.PacketConn
	tcp  net.Listener
	srv  *http.Server

	inflaters sync.Pool // of zlib readers, for decodeUpdate

	mu        sync.Mutex
	store     *store
	lastSweep time.Time
	lastFull  time.Time // when a "catalog full" warning was last logged
}

// Listen opens the server's sockets. Call Serve to run it.
func Listen(cfg ServerConfig) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = ":" + strconv.Itoa(DefaultPort)
	}
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = 30 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxRecord <= 0 {
		cfg.MaxRecord = 64 << 10
	}
	if cfg.MaxPerSource <= 0 {
		cfg.MaxPerSource = 100
	}
	if cfg.MaxTotal <= 0 {
		cfg.MaxTotal = 64 << 20
	}
	if cfg.MaxPerSubnet <= 0 {
		cfg.MaxPerSubnet = cfg.MaxTotal / 4
	}
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, store: newStore(cfg.MaxPerSource, cfg.MaxPerSubnet, cfg.MaxTotal)}
	// With port 0 the three sockets must still sit on p and p+1: retry
	// until a free pair turns up.
	for attempt := 0; ; attempt++ {
		err = s.open(host, port)
		if err == nil || port != "0" || attempt == 20 {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.serveHTTP)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	return s, nil
}

func (s *Server) open(host, port string) error {
	h, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return err
	}
	p := h.Addr().(*net.TCPAddr).Port
	u, err := net.ListenPacket("udp", net.JoinHostPort(host, strconv.Itoa(p)))
	if err != nil {
		h.Close()
		return err
	}
	// A larger queue rides out bursts of updates (a flood, or many
	// masters advertising at once) that would otherwise be dropped by
	// the kernel before they are read; the kernel caps it at
	// net.core.rmem_max, and a smaller one only drops more.
	if uc, ok := u.(*net.UDPConn); ok {
		uc.SetReadBuffer(udpReadBuffer)
	}
	t, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p+1)))
	if err != nil {
		h.Close()
		u.Close()
		return err
	}
	s.http, s.udp, s.tcp = h, u, t
	return nil
}

// Port is the port the server listens on (UDP and HTTP; TCP updates go to
// Port+1).
func (s *Server) Port() int { return s.http.Addr().(*net.TCPAddr).Port }

// Serve runs the server until ctx is cancelled.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 3)
	go func() { errc <- s.srv.Serve(s.http) }()
	go func() { errc <- s.serveUDP() }()
	go func() { errc <- s.serveTCP() }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		s.close()
		return err
	}
	s.close()
	return nil
}

func (s *Server) close() {
	s.srv.Close()
	s.udp.Close()
	s.tcp.Close()
}

func (s *Server) serveUDP() error {
	buf := make([]byte, 65536)
	for {
		n, from, err := s.udp.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		s.update(buf[:n], from, false)
	}
}

func (s *Server) serveTCP() error {
	// A flood of connections waits in the kernel's queue, not in ours.
	slots := make(chan struct{}, maxTCPUpdates)
	for {
		slots <- struct{}{}
		conn, err := s.tcp.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go func() {
			defer func() { <-slots }()
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			limit := s.maxUpdate()
			body, err := io.ReadAll(io.LimitReader(conn, int64(limit)+1))
			if err != nil || len(body) > limit {
				s.log.Warn("catalog: bad TCP update", "from", conn.RemoteAddr(), "err", err, "bytes", len(body))
				return
			}
			s.update(body, conn.RemoteAddr(), true)
		}()
	}
}

// update stores one update, heard from from over TCP or UDP: JSON,
// zlib-compressed JSON (first byte 0x1A, as CCTools compresses) or the
// legacy "name value" lines.
func (s *Server) update(body []byte, from net.Addr, viaTCP bool) {
	rec, err := decodeUpdate(body, s.maxUpdate(), &s.inflaters)
	if err != nil {
		s.log.Warn("catalog: rejected update", "from", from, "err", err)
		return
	}
	host := from.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	now := s.cfg.Now()
	rec["address"] = host
	rec["lastheardfrom"] = float64(now.Unix())
	if rec.String("name") == "" {
		rec["name"] = host
	}
	js, err := json.Marshal(rec)
	if err != nil {
		s.log.Warn("catalog: rejected update", "from", from, "err", err)
		return
	}
	if len(js) > s.cfg.MaxRecord {
		s.log.Warn("catalog: rejected update", "from", from, "bytes", len(js), "limit", s.cfg.MaxRecord)
		return
	}
	life := s.cfg.Lifetime
	if l := rec.Float("lifetime"); l > 0 && time.Duration(l*float64(time.Second)) < life {
		life = time.Duration(l * float64(time.Second))
	}
	key := host + ":" + rec.String("port") + ":" + rec.String("name")
	if u := rec.String("uuid"); u != "" {
		key += ":" + u
	}
	size := heldBytes(key, rec, js)
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.lastSweep) >= time.Second {
		s.lastSweep = now
		s.store.sweep(now)
	}
	switch s.store.put(key, rec, js, size, host, viaTCP, now, now.Add(life)) {
	case droppedFull:
		if now.Sub(s.lastFull) >= time.Minute {
			s.lastFull = now
			s.log.Warn("catalog full: dropping new records that outrank none held", "from", from, "bytes", s.store.total, "limit", s.cfg.MaxTotal)
		}
	case droppedOverTCP:
		s.log.Debug("catalog: dropped a UDP update of a record heard over TCP", "from", from, "key", key)
	}
}

// maxUpdate bounds an update before it is parsed (decompressed, if it
// was): four times MaxRecord, since a record may shrink when its spaces
// are dropped.
func (s *Server) maxUpdate() int { return 4 * s.cfg.MaxRecord }

// decodeUpdate decodes one update of at most limit bytes once
// decompressed, taking a zlib reader from inflaters if it has one and
// leaving it there when done: a new one allocates some 40 KB, most of the
// cost of a small update.
func decodeUpdate(body []byte, limit int, inflaters *sync.Pool) (Record, error) {
	if len(body) > 0 && body[0] == 0x1A {
		var zr io.ReadCloser
		var err error
		if r, ok := inflaters.Get().(io.ReadCloser); ok {
			zr = r
			err = r.(zlib.Resetter).Reset(bytes.NewReader(body[1:]), nil)
		} else {
			zr, err = zlib.NewReader(bytes.NewReader(body[1:]))
		}
		if err != nil {
			return nil, err
		}
		body, err = io.ReadAll(io.LimitReader(zr, int64(limit)+1))
		inflaters.Put(zr)
		if err != nil {
			return nil, err
		}
		if len(body) > limit {
			return nil, fmt.Errorf("update of more than %d bytes", limit)
		}
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, errors.New("empty update")
	}
	rec := Record{}
	if body[0] == '{' {
		if err := json.Unmarshal(body, &rec); err != nil {
			return nil, err
		}
		return rec, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), " ")
		if name == "" {
			continue
		}
		if f, err := strconv.ParseFloat(value, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			rec[name] = f
		} else {
			rec[name] = value
		}
	}
	if len(rec) == 0 {
		return nil, errors.New("no fields in update")
	}
	return rec, nil
}

// Records returns the live records, expiring old ones.
func (s *Server) Records() []Record {
	live := s.live()
	out := make([]Record, len(live))
	for i, e := range live {
		out[i] = e.rec
	}
	return out
}

// live returns the live entries in the order of their keys.
func (s *Server) live() []*entry {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastSweep = now
	s.store.sweep(now)
	keys := make([]string, 0, len(s.store.records))
	for k := range s.store.records {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*entry, len(keys))
	for i, k := range keys {
		out[i] = s.store.records[k]
	}
	return out
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	var filter *Filter
	switch {
	case path == "/query.json":
		filter, _ = ParseFilter("")
	case strings.HasPrefix(path, "/query/"):
		src := strings.TrimPrefix(path, "/query/")
		if len(src) > 8192 {
			http.Error(w, "filter too long", http.StatusBadRequest)
			return
		}
		expr, err := base64.StdEncoding.DecodeString(src)
		if err != nil {
			expr, err = base64.URLEncoding.DecodeString(src)
		}
		if err != nil {
			http.Error(w, "filter is not base64", http.StatusBadRequest)
			return
		}
		if filter, err = ParseFilter(string(expr)); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	case path == "/":
		s.serveIndex(w)
		return
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	// One record per line inside the array, as CCTools writes it. Every
	// record was checked when it came in, and all of them fit in MaxTotal,
	// which counts each for more than its JSON and the ",\n" after it.
	var b bytes.Buffer
	b.WriteString("[\n")
	n := 0
	for _, e := range s.live() {
		if !filter.Match(e.rec) {
			continue
		}
		if n > 0 {
			b.WriteString(",\n")
		}
		b.Write(e.json)
		n++
	}
	if n > 0 {
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	writeWhole(w, b.Bytes())
}

// writeWhole sends body with its Content-Length: CCTools' clients
// (work_queue_status, work_queue_worker -M) do not read a chunked body,
// which net/http sends for answers past its 2 KB buffer otherwise.
func writeWhole(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

func (s *Server) serveIndex(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var b bytes.Buffer
	fmt.Fprintf(&b, "%-20s %-24s %6s %8s %8s %9s %8s\n", "TYPE", "NAME", "PORT", "PROJECT", "WAITING", "RUNNING", "WORKERS")
	for _, r := range s.Records() {
		fmt.Fprintf(&b, "%-20s %-24s %6s %8s %8d %9d %8d\n", r.String("type"), r.String("name"), r.String("port"),
			r.String("project"), r.Int("tasks_waiting"), r.Int("tasks_running"), r.Int("workers"))
	}
	writeWhole(w, b.Bytes())
}
