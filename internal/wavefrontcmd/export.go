package wavefrontcmd

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/sparsematrix"
	"github.com/rightsize/rightsize/wavefront"
)

type exportOptions struct {
	streams cmdutil.Streams
	format  string
	output  string
}

func newExportCommand(s cmdutil.Streams) *cobra.Command {
	o := &exportOptions{streams: s}
	cmd := &cobra.Command{
		Use:   "export [flags] Rdir|FILE",
		Short: "Print a Wavefront result as TSV, CSV or a grid",
		Long: `export prints the cells of a Wavefront result: the boundary files and
R.matrix of an R directory (trailing newlines of the files trimmed), or the
cells of one sparse-matrix FILE (such as a sub-problem's -o output).

Formats:
  tsv   x, y and the value, tab-separated, one cell a line, sorted by x then y;
        backslash, tab, newline and carriage return in values are written
        \\, \t, \n and \r
  csv   the same as RFC 4180 CSV with a header line x,y,value
  grid  CSV with one line per y (from 0 up) and one column per x (from 0),
        headed by the x numbers; missing cells are empty`,
		Args: cmdutil.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExport(o, args[0])
		},
	}
	cmd.Flags().StringVarP(&o.format, "format", "f", "tsv", "tsv, csv or grid")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write to `FILE` instead of standard output")
	return cmd
}

type exportCell struct {
	x, y  int
	value []byte
}

func runExport(o *exportOptions, path string) error {
	if o.format != "tsv" && o.format != "csv" && o.format != "grid" {
		return cmdutil.Usagef("--format %q: want tsv, csv or grid", o.format)
	}
	if err := cmdutil.CheckOutputPath("-o", o.output); err != nil {
		return err
	}
	cells, err := loadResult(path)
	if err != nil {
		return err
	}
	var w io.Writer = o.streams.Out
	var file *cmdutil.OutputFile
	if o.output != "" {
		// Written beside it and renamed into place: a failed export leaves
		// the previous file as it was.
		if file, err = cmdutil.CreateOutput(o.output); err != nil {
			return err
		}
		defer file.Abort()
		w = file
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	switch o.format {
	case "tsv":
		err = writeTSV(bw, cells)
	case "csv":
		err = writeCSV(bw, cells)
	case "grid":
		err = writeGrid(bw, cells)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil && file != nil {
		err = file.Commit()
	}
	return err
}

// loadResult reads an R directory (its boundary files, then R.matrix over
// them) or a single sparse-matrix file, sorted by x then y.
func loadResult(path string) ([]exportCell, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	m := map[sparsematrix.Key][]byte{}
	matrix := path
	if st.IsDir() {
		dir, err := wavefront.OpenDir(path)
		if err != nil {
			return nil, err
		}
		for _, k := range dir.Boundary() {
			v, err := os.ReadFile(dir.CellPath(k.X, k.Y))
			if err != nil {
				return nil, err
			}
			// Trailing newlines are trimmed, as they are from the
			// results of programs.
			m[k] = bytes.TrimRight(v, "\r\n")
		}
		matrix = dir.MatrixPath()
		if _, err := os.Stat(matrix); os.IsNotExist(err) {
			if len(m) == 0 {
				return nil, fmt.Errorf("%s has neither %s nor boundary files: nothing to export", path, wavefront.MatrixFile)
			}
			matrix = ""
		}
	}
	if matrix != "" {
		if err := sparsematrix.Scan(matrix, func(r sparsematrix.Record) error {
			m[sparsematrix.Key{X: r.X, Y: r.Y}] = r.Value
			return nil
		}); err != nil {
			return nil, err
		}
	}
	cells := make([]exportCell, 0, len(m))
	for k, v := range m {
		cells = append(cells, exportCell{k.X, k.Y, v})
	}
	slices.SortFunc(cells, func(a, b exportCell) int {
		return cmp.Or(cmp.Compare(a.x, b.x), cmp.Compare(a.y, b.y))
	})
	return cells, nil
}

var tsvEscaper = strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`, "\r", `\r`)

func writeTSV(w *bufio.Writer, cells []exportCell) error {
	for _, c := range cells {
		w.WriteString(strconv.Itoa(c.x))
		w.WriteByte('\t')
		w.WriteString(strconv.Itoa(c.y))
		w.WriteByte('\t')
		if _, err := tsvEscaper.WriteString(w, string(c.value)); err != nil {
			return err
		}
		if err := w.WriteByte('\n'); err != nil {
			return err
		}
	}
	return nil
}

func writeCSV(w io.Writer, cells []exportCell) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"x", "y", "value"})
	for _, c := range cells {
		cw.Write([]string{strconv.Itoa(c.x), strconv.Itoa(c.y), string(c.value)})
	}
	cw.Flush()
	return cw.Error()
}

func writeGrid(w io.Writer, cells []exportCell) error {
	maxX, maxY := 0, 0
	for _, c := range cells {
		maxX, maxY = max(maxX, c.x), max(maxY, c.y)
	}
	rows := make([][]string, maxY+1)
	for y := range rows {
		rows[y] = make([]string, maxX+2)
		rows[y][0] = strconv.Itoa(y)
	}
	for _, c := range cells {
		rows[c.y][c.x+1] = string(c.value)
	}
	header := make([]string, maxX+2)
	header[0] = "y\\x"
	for x := 0; x <= maxX; x++ {
		header[x+1] = strconv.Itoa(x)
	}
	cw := csv.NewWriter(w)
	cw.Write(header)
	cw.WriteAll(rows)
	return cw.Error()
}
