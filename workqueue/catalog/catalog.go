// Package catalog is the Work Queue catalog: a server that collects the
// JSON records masters send about themselves (over UDP, or TCP on the port
// above) and answers HTTP queries for them, and the client side that sends
// records, queries a catalog and reads the masters out of the answer. It is
// wire-compatible with CCTools: CCTools masters can report to it and
// work_queue_status and work_queue_worker -M can query it. It does not
// authenticate senders. It sets a record's address (where it heard the
// record from) and lastheardfrom itself, whatever the record says;
// everything else is the sender's word, and what must be trusted is signed
// by its sender, as a pool signs its decision (package enforce).
//
// It does not decide anything about the masters it lists; its users do
// that with what Query returns: the status command, workers started with -M
// and the factory.
//
// # Limits and floods
//
// UDP is one-way and its source address is the sender's claim: anyone
// can send updates from any address, and the catalog cannot ask back
// (CCTools' protocol has no answer). So the server bounds what it holds,
// so that no sender can make its answer unreadable or its memory run out:
// a record's size (ServerConfig.MaxRecord, of JSON), records per address
// (MaxPerSource), memory per /24 or /64 subnet (MaxPerSubnet, a quarter of
// the whole by default) and memory in all (MaxTotal), a record's memory
// estimated from what it is made of (from 2.2 to 15 times its JSON). When
// a new record would pass a bound, the record's standing decides what it
// may replace:
//
//   - heard once: heard over UDP once, or only within a second of its
//     first update. A flood from spoofed addresses is made of these.
//   - refreshed: heard over UDP again, a second or more after its first
//     update, as a master or pool advertising at its interval is.
//   - over TCP: heard over TCP, whose handshake shows that the sender holds
//     the address it sends from.
//
// A new record replaces the oldest record heard once (within the bound it
// would pass: its address's, its subnet's or the whole catalog's). A new
// record over TCP, when there is none, replaces the refreshed record first
// heard most recently, so that a flood's go before those of masters that
// were advertising before it began; and at its address's bound, any of
// that address's. Nothing else replaces a record over TCP. A record that
// may replace none, or cannot fit in every bound by replacing what it may,
// is dropped, and replaces nothing. Updates of records held are taken as
// long as they fit. Records that are not updated expire
// (ServerConfig.Lifetime).
//
// What this guarantees:
//
//   - A master refreshed at its interval before a flood began stays
//     listed, and its updates are taken, through any flood of new records
//     from any number of addresses; only new records over TCP replace it,
//     and only after every refreshed record first heard after it.
//   - A master that starts during a flood of new records is listed at its
//     first update, and stays listed if its second comes before the flood
//     has sent as many new records as the catalog holds: for a flood of
//     400-byte records, 64 MiB holds about 34,000, so a flood of up to
//     about 570 new records a second against a master advertising every
//     minute. A faster flood pushes it out between its updates (the
//     server itself takes far more; see bench/RESULTS.md).
//   - A flood that refreshes its records as a master does fills the
//     catalog with records no new one over UDP may replace: new masters
//     advertising over UDP are then not listed until those records
//     expire, while masters advertising over TCP are (package workqueue's
//     Config.CatalogNetwork). The subnet bound keeps a flood from one
//     network, which is all a sender behind ingress filtering (BCP 38) can
//     spoof, to a quarter of the catalog.
//
// What it cannot guarantee: a record's content is the word of whoever
// sent it from the master's address with the master's port and name. Over
// UDP that is anyone who can spoof the address, unless the master
// advertises over TCP: a record heard over TCP is not updated over UDP
// (so a master that changes from TCP to UDP leaves its old record until
// it expires).
// Over TCP it is anyone on the master's host (any user there can open a
// connection from its address); the catalog cannot tell two senders from
// one address apart, nor could CCTools' without authenticating updates,
// which its protocol does not do.
package catalog

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DefaultPort is the catalog port CCTools uses: UDP updates and HTTP queries
// on it, TCP updates on the port above.
const DefaultPort = 9097

// Record is one catalog entry, a JSON object.
type Record map[string]any

// String returns a field as a string ("" if absent).
func (r Record) String(key string) string {
	switch v := r[key].(type) {
	case string:
		return v
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}

// Float returns a numeric field (0 if absent or not a number).
func (r Record) Float(key string) float64 {
	switch v := r[key].(type) {
	case float64:
		return v
	case int:
		return float64(v)
	case int64:
		return float64(v)
	case string:
		f, _ := strconv.ParseFloat(v, 64)
		return f
	}
	return 0
}

// Int returns a numeric field rounded towards zero.
func (r Record) Int(key string) int64 { return int64(r.Float(key)) }

// Master is what a worker or a status listing needs from a master's record.
type Master struct {
	Project string
	Name    string // host name the catalog knows the master by
	Address string // IP the catalog heard the record from
	Port    int
	Record  Record
}

// Addr is the address to connect to: the address the catalog saw, or the
// name when it has none.
func (m Master) Addr() string {
	host := m.Address
	if host == "" {
		host = m.Name
	}
	return net.JoinHostPort(host, strconv.Itoa(m.Port))
}

// Masters picks the Work Queue masters (type wq_master or wq_manager) out of
// query results, newest first.
func Masters(recs []Record) []Master {
	var out []Master
	for _, r := range recs {
		if t := r.String("type"); t != "wq_master" && t != "wq_manager" {
			continue
		}
		port := int(r.Int("port"))
		if port <= 0 || port > 65535 {
			continue
		}
		out = append(out, Master{Project: r.String("project"), Name: r.String("name"), Address: r.String("address"), Port: port, Record: r})
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].Record.Float("lastheardfrom") > out[j].Record.Float("lastheardfrom")
	})
	return out
}

// FindMasters asks the catalogs at addrs, in turn, for the Work Queue
// masters whose project matches project (every master, if project is nil),
// newest first, and returns those of the first catalog that lists any. It
// fails only when no catalog answers.
func FindMasters(ctx context.Context, addrs []string, project *regexp.Regexp) ([]Master, error) {
	var errs []error
	for _, addr := range addrs {
		// Unfiltered: every catalog serves /query.json, and Masters
		// picks the masters out.
		recs, err := Query(ctx, addr, "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var found []Master
		for _, m := range Masters(recs) {
			if project == nil || project.MatchString(m.Project) {
				found = append(found, m)
			}
		}
		if len(found) > 0 {
			return found, nil
		}
	}
	switch {
	case len(addrs) == 0:
		return nil, errors.New("no catalog to ask")
	case len(errs) == len(addrs):
		return nil, errors.Join(errs...)
	}
	return nil, nil
}

// DefaultAddrs returns the catalogs named by $CATALOG_HOST and $CATALOG_PORT
// (comma-separated hosts), as CCTools reads them, or localhost:9097.
func DefaultAddrs() []string {
	port := os.Getenv("CATALOG_PORT")
	if port == "" {
		port = strconv.Itoa(DefaultPort)
	}
	hosts := os.Getenv("CATALOG_HOST")
	if hosts == "" {
		hosts = "localhost"
	}
	var out []string
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err == nil {
			out = append(out, h)
		} else {
			out = append(out, net.JoinHostPort(h, port))
		}
	}
	return out
}

// maxQueryAnswer bounds what Query reads from a catalog.
const maxQueryAnswer = 64 << 20

// Query asks the catalog at addr ("host:port") for its records matching
// filter (see ParseFilter; "" for all).
func Query(ctx context.Context, addr, filter string) ([]Record, error) {
	path := "/query.json"
	if filter != "" {
		path = "/query/" + base64.StdEncoding.EncodeToString([]byte(filter))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		// Without the request's 'Get "http://addr/query.json"': the
		// address is said already, and the path is no user's concern.
		if ue, ok := err.(*url.Error); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("catalog %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxQueryAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("catalog %s: %s: %.200s", addr, resp.Status, bytes.TrimSpace(body))
	}
	if len(body) > maxQueryAnswer {
		return nil, fmt.Errorf("catalog %s: answer larger than %d MiB", addr, maxQueryAnswer>>20)
	}
	// An element that is not an object (another catalog's oddity) is
	// skipped rather than spoiling the whole answer.
	var raw []json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("catalog %s: bad answer: %w", addr, err)
	}
	recs := make([]Record, 0, len(raw))
	for _, r := range raw {
		var rec Record
		if err := json.Unmarshal(r, &rec); err == nil && rec != nil {
			recs = append(recs, rec)
		}
	}
	return recs, nil
}

// Send sends one record to the catalog at addr, over "udp" (one datagram to
// the catalog's port, as Debian's CCTools does) or "tcp" (to the port above).
func Send(ctx context.Context, addr, network string, rec Record) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("catalog update: %w", err)
	}
	switch network {
	case "udp", "":
		var d net.Dialer
		conn, err := d.DialContext(ctx, "udp", addr)
		if err != nil {
			return fmt.Errorf("catalog update to %s: %w", addr, err)
		}
		defer conn.Close()
		if _, err := conn.Write(body); err != nil {
			return fmt.Errorf("catalog update to %s: %w", addr, err)
		}
		return nil
	case "tcp":
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("catalog update: %w", err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return fmt.Errorf("catalog update: bad port %q", port)
		}
		d := net.Dialer{Timeout: 5 * time.Second}
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(p+1)))
		if err != nil {
			return fmt.Errorf("catalog update to %s: %w", addr, err)
		}
		defer conn.Close()
		if deadline, ok := ctx.Deadline(); ok {
			conn.SetDeadline(deadline)
		}
		_, err = conn.Write(body)
		return err
	}
	return errors.New("catalog update: network must be udp or tcp")
}
