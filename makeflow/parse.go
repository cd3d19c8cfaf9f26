package makeflow

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// maxSubstitutionDepth bounds how deeply a substituted value may itself
// contain substitutions (a value that names itself would otherwise loop).
const maxSubstitutionDepth = 32

// maxErrors is how many errors one parse reports before giving up.
const maxErrors = 50

// maxText bounds a variable's value, a command and a rule's file list, so
// that values that double at each "X+=$X" or expand into themselves many
// times over end in an error, not in exhausted memory.
const maxText = 16 << 20

// maxSubstitutions bounds the substitutions in one command or rule line,
// for values that expand into many others without growing.
const maxSubstitutions = 1 << 20

// readWorkflow returns the text of the workflow file at path. Its error
// names the file, as the user gave it, and what is wrong, without the
// system call: "workflow wf.mf: no such file or directory".
func readWorkflow(path string) ([]byte, error) {
	src, err := os.ReadFile(path)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if errors.Is(pe.Err, syscall.EISDIR) {
			return nil, fmt.Errorf("workflow %s: a directory, not a file", path)
		}
		return nil, fmt.Errorf("workflow %s: %w", path, pe.Err)
	}
	return src, err
}

// ParseFile reads the workflow in the file at path. environ is the
// environment $NAME falls back to when NAME is not a workflow variable, as
// "NAME=value" strings; nil means the process's environment.
//
// The error, if any, is an ErrorList with every problem found, each with its
// file:line:column.
func ParseFile(path string, environ []string) (*Workflow, error) {
	src, err := readWorkflow(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, src, environ)
}

// Parse reads a workflow from src; name is used in error positions and as
// Workflow.Path. See ParseFile for environ.
//
// The language is CCTools' Makeflow language:
//
//	# comment
//	NAME=value                    variable (expanded immediately); NAME+=more appends
//	export NAME[=value] [NAME...] pass variables to the commands' environment
//	.MAKEFLOW CATEGORY name       later rules belong to this category
//	.MAKEFLOW CORES|MEMORY|DISK|GPUS|WALL_TIME n   resources of the category
//	.SIZE file bytes              estimated size of a file
//	targets : sources             a rule; names may be quoted, a->b renames
//	NAME=value                    (between a rule and its command) rule-local
//		command                   one line, indented by a tab (or spaces)
//
// Commands may start with LOCAL (always run on this machine) or be
// "MAKEFLOW file [dir]" to run a nested workflow. $NAME, $(NAME) and ${NAME}
// are replaced when the file is read, except inside single quotes; write \$
// or $$ for a $ that the shell should see. A variable's value keeps its
// quotes, and is read again where it is used (so a value holding two quoted
// names gives two files). A backslash makes the next character literal, also
// inside quotes, and is removed (so \\ gives one backslash); a backslash at
// the end of a line joins the next line. An unquoted # starts a comment, also
// in commands. Runs of blanks in a command outside quotes become one space.
//
// These are CCTools' rules, with three differences: $$ is accepted, an
// export applies to the rules after it (not to those before), and every
// error is reported, not just the first.
func Parse(name string, src []byte, environ []string) (*Workflow, error) {
	if environ == nil {
		environ = os.Environ()
	}
	p := newParser(name, environ)
	if i := bytes.IndexByte(src, 0); i >= 0 {
		line := 1 + bytes.Count(src[:i], []byte("\n"))
		return nil, ErrorList{{Pos: Pos{File: name, Line: line}, Msg: "file contains a NUL byte; is it a Makeflow?"}}
	}
	src = bytes.ReplaceAll(src, []byte("\r\n"), []byte("\n"))
	p.parse(newScanner(name, src))
	if len(p.errs) > 0 {
		sortErrors(p.errs)
		return nil, p.errs
	}
	return p.wf, nil
}

func sortErrors(errs ErrorList) {
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := errs[i].Pos, errs[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// A variable is a workflow variable's value and where it was last set.
type variable struct {
	value string
	pos   Pos
}

type category struct {
	name string
	vars map[string]variable
}

const defaultCategory = "default"

type parser struct {
	file string
	env  map[string]string
	errs ErrorList
	wf   *Workflow

	defaultCat *category
	cats       map[string]*category
	cat        *category // the current category for rules that follow

	exports  []string // exported names, in the order first exported
	exported map[string]bool

	// The rule whose command line has not been read yet, with its local
	// variables (a map kept from rule to rule, emptied) and category; nil
	// between rules.
	rule     *Rule
	ruleBad  bool // the rule line had errors: read its command, then drop it
	ruleVars map[string]variable
	ruleCat  *category

	lastRule *Rule // the last complete rule, for "second command" errors

	// Buffers kept from rule to rule, so that a rule costs no allocations
	// but its own: the rule line's tokens, its file lists' sets of names,
	// and its environment's variables and key.
	fl            fileLexer
	targets, srcs fileList
	envVars       []envVar
	envKey        []byte
	envs          map[string][]string // interned Rule.Env slices, by envKey
}

// envVar is one variable of a rule's environment.
type envVar struct{ name, value string }

func newParser(file string, environ []string) *parser {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	def := &category{name: defaultCategory, vars: map[string]variable{}}
	return &parser{
		file:       file,
		env:        env,
		wf:         &Workflow{Path: file, Sizes: map[string]int64{}},
		defaultCat: def,
		cats:       map[string]*category{defaultCategory: def},
		cat:        def,
		exported:   map[string]bool{},
		envs:       map[string][]string{},
	}
}

func (p *parser) errorf(pos Pos, format string, args ...any) {
	if len(p.errs) == maxErrors {
		p.errs = append(p.errs, &Error{Pos: pos, Msg: "too many errors"})
	}
	if len(p.errs) > maxErrors {
		return
	}
	p.errs = append(p.errs, &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) parse(s *scanner) {
	for !s.eof() && len(p.errs) <= maxErrors {
		p.line(s)
	}
	if p.rule != nil {
		p.errorf(p.rule.Pos, "rule has no command (commands are indented by a tab)")
	}
	p.finishWorkflow()
}

// line reads one logical line starting at column 1.
func (p *parser) line(s *scanner) {
	indent := s.skipBlanks()
	c := s.peek()
	switch {
	case s.atLineEnd():
		s.endLine()
	case c == '#':
		s.skipToLineEnd()
		s.endLine()
	case c == '@':
		s.next()
		p.statement(s)
	case indent != 0 && p.rule != nil:
		// Between a rule and its command: a tab always starts the command;
		// an indented NAME=value is a rule-local variable, as in CCTools.
		if indent == '\t' || !s.looksLikeAssignment() {
			p.command(s)
		} else {
			p.statement(s)
		}
	case indent == ' ' && s.looksLikeAssignment():
		p.statement(s)
	case indent != 0 && !p.startsRule(s):
		if p.lastRule != nil {
			p.errorf(s.pos(), "rule at line %d already has a command: a rule has exactly one command line "+
				"(join commands with ';' or '&&', or continue the line with a trailing '\\')", p.lastRule.Pos.Line)
		} else {
			p.errorf(s.pos(), "command line outside a rule (a command follows its \"targets: sources\" line)")
		}
		s.skipLogicalLine()
	case s.hasWord("export") || s.hasWord(".MAKEFLOW") || s.hasWord(".SIZE"):
		p.statement(s)
	case p.startsRule(s):
		p.ruleLine(s)
	case c == '.':
		p.statement(s) // reports the unknown directive
	default:
		if _, equal, _ := s.lineShape(); equal >= 0 {
			p.statement(s)
			return
		}
		p.errorf(s.pos(), "expected a rule (targets: sources), a variable (NAME=value), export or a .MAKEFLOW directive")
		s.skipLogicalLine()
	}
}

// startsRule reports whether the line is a rule line: a ':' comes before
// any '='. A line with a quote left open and no '=' before it is taken for
// a rule line too, so that the error is about the quote.
func (p *parser) startsRule(s *scanner) bool {
	colon, equal, open := s.lineShape()
	if colon >= 0 && (equal < 0 || colon < equal) {
		return true
	}
	return open >= 0 && (equal < 0 || open < equal)
}

// statement reads an assignment, an export or a directive.
func (p *parser) statement(s *scanner) {
	s.skipBlanks()
	pos := s.pos()
	if s.peek() == '.' {
		s.next()
		p.directive(s, "."+s.readName(), pos)
		return
	}
	if s.hasWord("export") {
		s.readName()
		p.export(s)
		return
	}
	name := s.readName()
	if name == "" {
		if s.peek() == '=' {
			p.errorf(pos, "assignment without a variable name")
		} else {
			p.errorf(pos, "expected a variable name")
		}
		s.skipLogicalLine()
		return
	}
	p.assignment(s, name, false)
}

// assignment reads "= value" or "+= value" after a variable name.
func (p *parser) assignment(s *scanner, name string, export bool) {
	s.skipBlanks()
	opPos := s.pos()
	appendOp := false
	switch {
	case s.peek() == '=':
		s.next()
	case s.peek() == '+' && s.peekAt(1) == '=':
		appendOp = true
		s.next()
		s.next()
	default:
		if c := s.peek(); strings.IndexByte("-!?:*", c) >= 0 && c != 0 && s.peekAt(1) == '=' {
			p.errorf(opPos, "unknown operator \"%c=\" after %s: only = and += assign variables", c, name)
		} else {
			p.errorf(opPos, "expected '=' or '+=' after %s", name)
		}
		s.skipLogicalLine()
		return
	}
	s.skipBlanks()
	valuePos := s.pos()
	value, ok := p.value(s)
	if !ok {
		return
	}
	if export {
		p.export1(name)
	}
	p.set(name, value, appendOp, valuePos)
}

// set assigns a variable in the current scope: the pending rule's own
// variables, or else the current category's (CATEGORY itself is global).
func (p *parser) set(name, value string, appendOp bool, pos Pos) {
	if appendOp {
		if old, ok := p.lookup(name); ok && old != "" {
			value = old + " " + value
		}
	}
	if len(value) > maxText {
		p.errorf(pos, "the value of %s is longer than %d MB", name, maxText>>20)
		return
	}
	if isResourceVar(name) {
		if _, err := parseResource(name, value); err != nil {
			p.errorf(pos, "%v", err)
			return
		}
	}
	v := variable{value: value, pos: pos}
	switch name {
	case "CATEGORY", "SYMBOL":
		if value == "" {
			p.errorf(pos, "empty category name")
			return
		}
		cat := p.category(value)
		if p.rule != nil {
			p.ruleCat = cat
			p.setRuleVar("CATEGORY", v)
		} else {
			p.cat = cat
			p.defaultCat.vars["CATEGORY"] = v
		}
		return
	}
	if p.rule != nil {
		p.setRuleVar(name, v)
	} else {
		p.cat.vars[name] = v
	}
}

// clearRuleVars empties the rule's variables for the next rule.
func (p *parser) clearRuleVars() {
	if len(p.ruleVars) > 0 {
		clear(p.ruleVars)
	}
}

// setRuleVar sets one of the pending rule's own variables.
func (p *parser) setRuleVar(name string, v variable) {
	if p.ruleVars == nil {
		p.ruleVars = map[string]variable{}
	}
	p.ruleVars[name] = v
}

func (p *parser) category(name string) *category {
	c, ok := p.cats[name]
	if !ok {
		c = &category{name: name, vars: map[string]variable{}}
		p.cats[name] = c
	}
	return c
}

// lookupVar finds a variable as the current line sees it: the pending
// rule's own variables, its category's, the global ones, then the
// environment.
func (p *parser) lookupVar(name string) (variable, bool) {
	if p.rule != nil {
		if v, ok := p.ruleVars[name]; ok {
			return v, true
		}
	}
	cat := p.cat
	if p.rule != nil {
		cat = p.ruleCat
	}
	if v, ok := cat.vars[name]; ok {
		return v, true
	}
	if v, ok := p.defaultCat.vars[name]; ok {
		return v, true
	}
	if v, ok := p.env[name]; ok {
		return variable{value: v}, true
	}
	return variable{}, false
}

func (p *parser) lookup(name string) (string, bool) {
	v, ok := p.lookupVar(name)
	return v.value, ok
}

func (p *parser) export(s *scanner) {
	s.skipBlanks()
	if _, equal, _ := s.lineShape(); equal >= 0 {
		pos := s.pos()
		name := s.readName()
		if name == "" {
			p.errorf(pos, "expected a variable name after export")
			s.skipLogicalLine()
			return
		}
		p.assignment(s, name, true)
		return
	}
	n := 0
	for !s.atLineEnd() && s.peek() != '#' {
		pos := s.pos()
		name := s.readName()
		if name == "" || !(s.atLineEnd() || s.peek() == ' ' || s.peek() == '\t' || s.peek() == '#') {
			p.errorf(pos, "export expects variable names (letters, digits and '_')")
			s.skipLogicalLine()
			return
		}
		p.export1(name)
		n++
		s.skipBlanks()
	}
	s.skipToLineEnd()
	s.endLine()
	if n == 0 {
		p.errorf(s.pos(), "export without a variable name")
	}
}

func (p *parser) export1(name string) {
	if !p.exported[name] {
		p.exported[name] = true
		p.exports = append(p.exports, name)
	}
	if p.rule != nil {
		p.errorf(p.rule.Pos, "export between a rule and its command; put it before the rule")
	}
}

func (p *parser) directive(s *scanner, name string, pos Pos) {
	words := p.directiveWords(s)
	switch name {
	case ".MAKEFLOW":
		if len(words) == 0 {
			p.errorf(pos, ".MAKEFLOW needs a setting, one of CATEGORY, CORES, MEMORY, DISK, GPUS, WALL_TIME, MPI_PROCESSES, MODE")
			return
		}
		key := words[0]
		if len(words) != 2 {
			p.errorf(key.pos, ".MAKEFLOW %s takes one value, got %d", key.text, len(words)-1)
			return
		}
		val := words[1]
		switch key.text {
		case "CATEGORY":
			p.set("CATEGORY", val.text, false, val.pos)
		case "CORES", "MEMORY", "DISK", "GPUS", "WALL_TIME", "MPI_PROCESSES":
			p.set(key.text, val.text, false, val.pos)
		case "MODE":
			switch val.text {
			case "MAX_THROUGHPUT", "MIN_WASTE", "FIXED":
				// Allocation modes tune how a batch system sizes tasks of
				// unknown needs; running locally they change nothing.
			default:
				p.errorf(val.pos, "unknown .MAKEFLOW MODE %q: expected MAX_THROUGHPUT, MIN_WASTE or FIXED", val.text)
			}
		default:
			p.errorf(key.pos, "unknown .MAKEFLOW directive %q: expected CATEGORY, CORES, MEMORY, DISK, GPUS, WALL_TIME, MPI_PROCESSES or MODE", key.text)
		}
	case ".SIZE":
		if len(words) != 2 {
			p.errorf(pos, ".SIZE takes a file name and a size, got %d words", len(words))
			return
		}
		size, err := ParseSize(words[1].text)
		if err != nil {
			p.errorf(words[1].pos, ".SIZE %s: %v", words[0].text, err)
			return
		}
		p.wf.Sizes[filepath.Clean(words[0].text)] = size
	default:
		p.errorf(pos, "unknown directive %q: expected .MAKEFLOW or .SIZE", name)
	}
}

type word struct {
	text string
	pos  Pos
}

// directiveWords reads the rest of a directive line as file-list words.
func (p *parser) directiveWords(s *scanner) []word {
	var fl fileLexer
	p.lexFiles(s, &fl)
	var words []word
	for _, t := range fl.toks {
		if t.kind != tokName {
			p.errorf(t.pos, "unexpected %q in directive", t.text)
			continue
		}
		words = append(words, word{t.text, t.pos})
	}
	return words
}

// value reads an assignment's value up to the end of the line: variables are
// substituted, escapes resolved and quotes kept, as CCTools does.
func (p *parser) value(s *scanner) (string, bool) {
	var b strings.Builder
	ok := true
	for !s.atLineEnd() {
		c := s.peek()
		switch c {
		case '#':
			s.skipToLineEnd()
		case '\\':
			s.next()
			b.WriteByte(s.escaped(unescape))
		case '\'':
			ok = p.singleQuoted(s, &b) && ok
		case '"':
			ok = p.doubleQuoted(s, &b) && ok
		case '$':
			text, _, sok := p.substitution(s, false)
			ok = sok && ok
			b.WriteString(text)
		default:
			b.WriteByte(s.next())
		}
	}
	s.endLine()
	return strings.TrimRight(b.String(), " \t"), ok
}

// unescape is what a backslash followed by c stands for outside double
// quotes: c itself, except that a backslash-newline joins lines.
func unescape(c byte) byte {
	if c == '\n' {
		return ' '
	}
	return c
}

// cEscape is what a backslash followed by c stands for inside double
// quotes, where CCTools also reads the C escapes \n, \t and so on.
func cEscape(c byte) byte {
	switch c {
	case 'a':
		return '\a'
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'v':
		return '\v'
	}
	return unescape(c)
}

// singleQuoted copies a '...' string, quotes included, to b. Nothing is
// substituted inside; a backslash still escapes the next character.
func (p *parser) singleQuoted(s *scanner, b *strings.Builder) bool {
	open := s.pos()
	b.WriteByte(s.next())
	for !s.eof() {
		c := s.next()
		switch c {
		case '\\':
			b.WriteByte(s.escaped(unescape))
		case '\'':
			b.WriteByte(c)
			return true
		default:
			b.WriteByte(c)
		}
	}
	p.errorf(open, "unterminated ' quote")
	return false
}

// doubleQuoted copies a "..." string, quotes included, to b, substituting
// variables inside it (their values are inserted as they are).
func (p *parser) doubleQuoted(s *scanner, b *strings.Builder) bool {
	open := s.pos()
	b.WriteByte(s.next())
	ok := true
	for !s.eof() {
		switch c := s.peek(); c {
		case '\\':
			s.next()
			b.WriteByte(s.escaped(cEscape))
		case '"':
			b.WriteByte(s.next())
			return ok
		case '$':
			text, _, sok := p.substitution(s, false)
			ok = sok && ok
			b.WriteString(text)
		default:
			b.WriteByte(s.next())
		}
	}
	p.errorf(open, "unterminated \" quote")
	return false
}

// substitution reads $NAME, $(NAME), ${NAME} or $$ and returns the text it
// stands for. literal reports a $$ (a plain "$", not to be read again).
func (p *parser) substitution(s *scanner, inCommand bool) (text string, literal, ok bool) {
	pos := s.pos()
	s.next() // $
	if s.peek() == '$' {
		s.next()
		return "$", true, true
	}
	var opener, closer byte
	switch s.peek() {
	case '(':
		opener, closer = '(', ')'
	case '{':
		opener, closer = '{', '}'
	}
	if closer != 0 {
		s.next()
	}
	name := s.readName()
	if name == "" {
		p.errorf(pos, "'$' must be followed by a variable name; write $$ or \\$ for a $ the shell should see")
		return "", false, false
	}
	if closer != 0 {
		if s.peek() != closer {
			p.errorf(s.pos(), "missing '%c' to close $%c%s", closer, opener, name)
			return "", false, false
		}
		s.next()
	}
	v, ok := p.lookup(name)
	if !ok {
		hint := ""
		if inCommand {
			hint = fmt.Sprintf(" (write \\$%s or $$%s to leave it to the shell)", name, name)
		}
		p.errorf(pos, "variable %s is not defined%s", name, hint)
		return "", false, false
	}
	return v, false, true
}

// Tokens of a rule line.
type tokKind int

const (
	tokName  tokKind = iota // a file name
	tokColon                // the ':' between targets and sources
	tokArrow                // '->', remote renaming
)

type ftok struct {
	kind tokKind
	text string
	pos  Pos
}

// A fileLexer collects the tokens of a file list. Text that touches (a
// quoted part next to an unquoted one, a substitution inside a name) is
// glued into one name, as in the shell.
type fileLexer struct {
	toks   []ftok
	cur    []byte
	curPos Pos
	inName bool
	size   int // bytes read, against maxText
	budget
}

// reset empties fl for another line, keeping its buffers.
func (fl *fileLexer) reset() {
	*fl = fileLexer{toks: fl.toks[:0], cur: fl.cur[:0]}
}

func (fl *fileLexer) add(c byte, pos Pos) {
	fl.start(pos)
	fl.cur = append(fl.cur, c)
	fl.size++
}

// start begins a name if none is open (so that "" gives an empty name).
func (fl *fileLexer) start(pos Pos) {
	if !fl.inName {
		fl.inName = true
		fl.curPos = pos
		fl.cur = fl.cur[:0]
	}
}

func (fl *fileLexer) end() {
	if fl.inName {
		fl.toks = append(fl.toks, ftok{kind: tokName, text: string(fl.cur), pos: fl.curPos})
		fl.inName = false
	}
}

func (fl *fileLexer) punct(kind tokKind, text string, pos Pos) {
	fl.size++
	fl.end()
	fl.toks = append(fl.toks, ftok{kind: kind, text: text, pos: pos})
}

// A budget bounds the substitutions that build one command or file list.
type budget struct {
	subs     int  // substitutions made
	overflow bool // the budget ran out; stop reading
}

// spent reports whether the text built so far (size bytes) has gone over
// the bounds or a substitution went too deep, reporting it once; reading
// then stops, skipping the rest of the line.
func (b *budget) spent(p *parser, s *scanner, size int, what string) bool {
	if !b.overflow && size <= maxText && b.subs <= maxSubstitutions {
		return false
	}
	if !b.overflow {
		b.overflow = true
		p.errorf(s.pos(), "%s longer than %d MB, or made of more than %d substitutions", what, maxText>>20, maxSubstitutions)
	}
	if s.fixed == nil {
		s.skipToLineEnd()
	}
	return true
}

// tooDeep reports a substitution nested more than maxSubstitutionDepth
// levels, once, and stops the reading.
func (b *budget) tooDeep(p *parser, pos Pos) {
	if !b.overflow {
		b.overflow = true
		p.errorf(pos, "variables substituted more than %d levels deep (does a variable contain itself?)", maxSubstitutionDepth)
	}
}

// lexFiles reads file-list tokens up to the end of the line (consuming it
// when s is the file itself). Substituted values are read again as file
// lists, so a variable holding several names gives several files.
func (p *parser) lexFiles(s *scanner, fl *fileLexer) {
	for !s.eof() {
		if fl.spent(p, s, fl.size, "file list") {
			return
		}
		pos := s.pos()
		switch c := s.peek(); c {
		case '\n':
			if s.fixed == nil {
				fl.end()
				s.endLine()
				return
			}
			fl.end()
			s.next()
		case ' ', '\t':
			fl.end()
			s.next()
		case '#':
			s.skipToLineEnd()
		case ':':
			s.next()
			fl.punct(tokColon, ":", pos)
		case '-':
			if s.peekAt(1) == '>' {
				s.next()
				s.next()
				fl.punct(tokArrow, "->", pos)
			} else {
				fl.add(s.next(), pos)
			}
		case '\\':
			s.next()
			if s.peek() == '\n' {
				s.next()
				fl.end()
			} else {
				fl.add(s.next(), pos)
			}
		case '\'', '"':
			p.quotedName(s, fl)
		case '$':
			text, literal, ok := p.substitution(s, false)
			switch {
			case !ok:
			case literal:
				fl.add('$', pos)
			case s.depth >= maxSubstitutionDepth:
				fl.tooDeep(p, pos)
			default:
				fl.subs++
				p.lexFiles(s.subScanner(text, pos), fl)
			}
		default:
			fl.add(s.next(), pos)
		}
	}
	if s.fixed == nil {
		fl.end()
	}
}

// quotedName reads a quoted part of a file name; the quotes are removed.
func (p *parser) quotedName(s *scanner, fl *fileLexer) {
	open := s.pos()
	quote := s.next()
	fl.start(open)
	for !s.eof() {
		pos := s.pos()
		c := s.peek()
		switch {
		case c == quote:
			s.next()
			return
		case c == '\n':
			p.errorf(open, "unterminated %c quote (file names cannot span lines)", quote)
			return
		case c == '\\':
			s.next()
			fl.add(s.escaped(unescape), pos)
		case c == '$' && quote == '"':
			text, _, ok := p.substitution(s, false)
			if ok {
				for i := 0; i < len(text); i++ {
					fl.add(text[i], pos)
				}
			}
		default:
			fl.add(s.next(), pos)
		}
	}
	p.errorf(open, "unterminated %c quote", quote)
}

// ruleLine reads "targets : sources" and starts a rule.
func (p *parser) ruleLine(s *scanner) {
	pos := s.pos()
	pos.Col = 1
	if p.rule != nil {
		p.errorf(p.rule.Pos, "rule has no command (commands are indented by a tab)")
		p.rule = nil
	}
	nerr := len(p.errs)
	fl := &p.fl
	fl.reset()
	p.lexFiles(s, fl)
	r := &Rule{ID: len(p.wf.Rules), Pos: pos}
	p.targets.reset()
	p.srcs.reset()
	targets := true
	colons := 0
	toks := fl.toks
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch t.kind {
		case tokColon:
			colons++
			if colons > 1 {
				p.errorf(t.pos, "second ':' in a rule line (quote or escape file names that contain ':')")
			}
			targets = false
		case tokArrow:
			p.errorf(t.pos, "'->' must stand between a local and a remote file name")
		case tokName:
			f := File{Name: t.text, Pos: t.pos}
			if i+1 < len(toks) && toks[i+1].kind == tokArrow {
				if i+2 >= len(toks) || toks[i+2].kind != tokName {
					p.errorf(toks[i+1].pos, "'->' must be followed by the file's remote name")
					i++
					continue
				}
				f.Remote = toks[i+2].text
				i += 2
			}
			if !p.checkFile(&f) {
				continue
			}
			if targets {
				p.targets.add(f)
			} else {
				p.srcs.add(f)
			}
		}
	}
	if colons == 0 && len(p.errs) == nerr {
		p.errorf(pos, "rule line without ':'")
	}
	r.Targets, r.Sources = p.targets.take(), p.srcs.take()
	p.rule = r
	p.ruleBad = len(p.errs) > nerr
	p.clearRuleVars()
	p.ruleCat = p.cat
}

// checkFile validates and cleans a file name from a rule line.
func (p *parser) checkFile(f *File) bool {
	if f.Name == "" {
		p.errorf(f.Pos, "empty file name")
		return false
	}
	if strings.ContainsRune(f.Name, '\n') {
		p.errorf(f.Pos, "file name contains a newline")
		return false
	}
	f.Name = filepath.Clean(f.Name)
	if f.Remote != "" {
		remote := filepath.Clean(f.Remote)
		if filepath.IsAbs(remote) || remote == ".." || strings.HasPrefix(remote, "../") {
			p.errorf(f.Pos, "remote name %q must be a relative path inside the task's sandbox", f.Remote)
			return false
		}
		f.Remote = remote
		if remote == f.Name {
			f.Remote = ""
		}
	}
	return true
}

// A fileList is a rule's targets or sources as its line names them, each
// file once: a short list is searched, a long one (a rule gathering 50,000
// outputs) keeps a set, so that a list of n names costs O(n), not O(n²).
type fileList struct {
	files []File
	names map[string]struct{} // nil while the list is short
}

// listSetMin is the length from which a fileList keeps a set.
const listSetMin = 16

// reset empties l. A set is dropped, not cleared: clearing costs its
// capacity, on every rule after a long one.
func (l *fileList) reset() { *l = fileList{} }

// add appends f unless the list names it already.
func (l *fileList) add(f File) {
	if len(l.files) < listSetMin {
		l.files = appendFile(l.files, f)
		return
	}
	if l.names == nil {
		l.names = make(map[string]struct{}, 2*len(l.files))
		for _, g := range l.files {
			l.names[g.Name] = struct{}{}
		}
	}
	if _, ok := l.names[f.Name]; ok {
		return
	}
	l.names[f.Name] = struct{}{}
	l.files = append(l.files, f)
}

// take returns the list, which is the caller's from then on.
func (l *fileList) take() []File {
	files := l.files
	l.files = nil
	return files
}

// appendFile adds f unless the list names it already.
func appendFile(files []File, f File) []File {
	for _, g := range files {
		if g.Name == f.Name {
			return files
		}
	}
	return append(files, f)
}

// command reads the pending rule's command line and completes the rule.
func (p *parser) command(s *scanner) {
	pos := s.pos()
	var b cmdBuilder
	nerr := len(p.errs)
	p.lexCommand(s, &b)
	s.endLine()
	r := p.rule
	cmd := b.String()
	r.CommandPos = pos
	nested := false
	for {
		if rest, ok := leadingWord(cmd, "LOCAL"); ok {
			r.Local, cmd = true, rest
			continue
		}
		if rest, ok := leadingWord(cmd, "MAKEFLOW"); ok {
			nested, cmd = true, rest
			continue
		}
		break
	}
	if local, ok := p.lookup("BATCH_LOCAL"); ok && isTrue(local) {
		r.Local = true
	}
	switch {
	case cmd == "" && len(p.errs) == nerr:
		p.errorf(pos, "empty command")
	case nested:
		args := splitWords(cmd)
		if len(args) > 3 {
			p.errorf(pos, "MAKEFLOW takes a workflow file, and optionally a directory to run it in; got %q", cmd)
			break
		}
		n := &Nested{File: filepath.Clean(args[0])}
		if len(args) >= 2 {
			n.Dir = filepath.Clean(args[1])
		}
		// A wrapper (a third word) only makes sense for CCTools' own
		// batch wrappers; it is ignored.
		r.Nested = n
		r.Sources = appendFile(r.Sources, File{Name: n.File, Pos: pos})
	default:
		r.Command = cmd
	}
	p.finishRule(len(p.errs) > nerr)
}

// leadingWord reports whether cmd starts with the word w and returns the
// rest of the command after it.
func leadingWord(cmd, w string) (string, bool) {
	if cmd == w {
		return "", true
	}
	if strings.HasPrefix(cmd, w+" ") {
		return cmd[len(w)+1:], true
	}
	return cmd, false
}

func isTrue(s string) bool {
	switch strings.ToLower(strings.Trim(s, `"' `)) {
	case "true", "yes", "1", "on":
		return true
	}
	return false
}

// splitWords splits a command's words, honouring simple quotes.
func splitWords(s string) []string {
	var words []string
	var cur strings.Builder
	in := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// A cmdBuilder assembles a command: runs of blanks outside quotes become
// one space, as CCTools writes commands.
type cmdBuilder struct {
	b     strings.Builder
	space bool
	budget
}

func (cb *cmdBuilder) blank() { cb.space = cb.b.Len() > 0 }

func (cb *cmdBuilder) byte(c byte) {
	if cb.space {
		cb.b.WriteByte(' ')
		cb.space = false
	}
	cb.b.WriteByte(c)
}

func (cb *cmdBuilder) String() string { return cb.b.String() }

// lexCommand reads a command up to the end of its line. Substituted values
// are read again as command text (so quotes in them work as if written in
// place).
func (p *parser) lexCommand(s *scanner, cb *cmdBuilder) {
	for !s.eof() {
		if cb.spent(p, s, cb.b.Len(), "command") {
			return
		}
		pos := s.pos()
		c := s.peek()
		switch c {
		case '\n':
			if s.fixed == nil {
				return
			}
			s.next()
			cb.blank()
		case ' ', '\t':
			s.next()
			cb.blank()
		case '#':
			s.skipToLineEnd()
		case '\\':
			s.next()
			if s.peek() == '\n' {
				s.next()
				cb.blank()
			} else {
				cb.byte(s.escaped(unescape))
			}
		case '\'':
			var b strings.Builder
			p.singleQuoted(s, &b)
			cb.string(b.String())
		case '"':
			var b strings.Builder
			p.doubleQuoted(s, &b)
			cb.string(b.String())
		case '$':
			text, literal, ok := p.substitution(s, true)
			switch {
			case !ok:
			case literal:
				cb.byte('$')
			case s.depth >= maxSubstitutionDepth:
				cb.tooDeep(p, pos)
			default:
				cb.subs++
				p.lexCommand(s.subScanner(text, pos), cb)
			}
		default:
			cb.byte(s.next())
		}
	}
}

func (cb *cmdBuilder) string(s string) {
	for i := 0; i < len(s); i++ {
		cb.byte(s[i])
	}
}

// finishRule completes the pending rule: its category, resources and
// environment are fixed as the variables stand now.
func (p *parser) finishRule(bad bool) {
	// p.rule stays set until the end so that lookups see the rule's scope.
	r := p.rule
	defer func() {
		p.rule, p.ruleCat = nil, nil
		p.clearRuleVars()
	}()
	if bad || p.ruleBad {
		return
	}
	r.Category = p.ruleCat.name
	p.envVars = p.envVars[:0]
	envSet := p.envSet
	for _, name := range []string{"CORES", "MEMORY", "DISK", "GPUS", "WALL_TIME"} {
		v, ok := p.lookupVar(name)
		if !ok || v.value == "" {
			continue
		}
		n, err := parseResource(name, v.value)
		if err != nil {
			where := v.pos
			if where.Line == 0 {
				where = r.Pos
				err = fmt.Errorf("environment variable %s: %w", name, err)
			}
			p.errorf(where, "%v", err)
			return
		}
		switch name {
		case "CORES":
			r.Resources.Cores = n
		case "MEMORY":
			r.Resources.MemoryMB = n
		case "DISK":
			r.Resources.DiskMB = n
		case "GPUS":
			r.Resources.GPUs = n
		case "WALL_TIME":
			r.Resources.WallTimeS = n
		}
	}
	r.BatchOptions, _ = p.lookup("BATCH_OPTIONS")
	// OpenMP programs read OMP_NUM_THREADS; CCTools keeps it and CORES in
	// step so that a rule's threads match what it declared.
	cores, haveCores := p.lookup("CORES")
	omp, haveOMP := p.lookup("OMP_NUM_THREADS")
	switch {
	case haveOMP:
		envSet("CORES", omp)
	case haveCores:
		envSet("OMP_NUM_THREADS", cores)
	default:
		envSet("OMP_NUM_THREADS", "1")
		envSet("CORES", "1")
	}
	if r.Category != defaultCategory {
		envSet("CATEGORY", r.Category)
	}
	for _, name := range []string{"CORES", "MEMORY", "DISK", "GPUS", "WALL_TIME"} {
		if v, ok := p.lookupVar(name); ok && v.pos.Line > 0 {
			envSet(name, v.value)
		}
	}
	for _, name := range p.exports {
		if v, ok := p.lookup(name); ok {
			envSet(name, v)
		}
	}
	r.Env = p.internEnv()
	p.wf.Rules = append(p.wf.Rules, r)
	p.lastRule = r
}

// envSet sets a variable of the environment being built for a rule.
func (p *parser) envSet(name, value string) {
	for i := range p.envVars {
		if p.envVars[i].name == name {
			p.envVars[i].value = value
			return
		}
	}
	p.envVars = append(p.envVars, envVar{name, value})
}

// internEnv returns the rule environment built in p.envVars as NAME=value
// strings, shared by every rule with the same one: rules made from one
// template allocate it once.
func (p *parser) internEnv() []string {
	key := p.envKey[:0]
	for _, v := range p.envVars {
		key = append(key, v.name...)
		key = append(key, '=')
		key = append(key, v.value...)
		key = append(key, 0)
	}
	p.envKey = key
	if env, ok := p.envs[string(key)]; ok {
		return env
	}
	env := make([]string, len(p.envVars))
	for i, v := range p.envVars {
		env[i] = v.name + "=" + v.value
	}
	p.envs[string(key)] = env
	return env
}

// finishWorkflow reads MAKEFLOW_INPUTS and MAKEFLOW_OUTPUTS.
func (p *parser) finishWorkflow() {
	for _, name := range []string{"MAKEFLOW_INPUTS", "MAKEFLOW_OUTPUTS"} {
		v, ok := p.defaultCat.vars[name]
		if !ok {
			continue
		}
		var fl fileLexer
		sc := newScanner(p.file, []byte(v.value))
		sc.fixed = &v.pos
		p.lexFiles(sc, &fl)
		fl.end()
		files := []string{}
		for _, t := range fl.toks {
			switch {
			case t.kind != tokName:
				p.errorf(v.pos, "%s must be a list of file names", name)
			case t.text != "": // "" is how CCTools' examples write an empty list
				files = append(files, filepath.Clean(t.text))
			}
		}
		if name == "MAKEFLOW_INPUTS" {
			p.wf.Inputs = files
		} else {
			p.wf.Outputs = files
		}
	}
}

func isResourceVar(name string) bool {
	switch name {
	case "CORES", "MEMORY", "DISK", "GPUS", "WALL_TIME", "MPI_PROCESSES":
		return true
	}
	return false
}

// parseResource reads a resource value: a whole number, with a size unit
// (M, G, T; MB by default) for MEMORY and DISK and a time unit (s, m, h, d;
// seconds by default) for WALL_TIME.
func parseResource(name, text string) (int64, error) {
	v := strings.Trim(strings.TrimSpace(text), `"'`)
	bad := func() (int64, error) {
		switch name {
		case "MEMORY", "DISK":
			return 0, fmt.Errorf("%s must be a size in MB such as 512 or 4G, got %q", name, text)
		case "WALL_TIME":
			return 0, fmt.Errorf("%s must be a time in seconds such as 3600 or 2h, got %q", name, text)
		}
		return 0, fmt.Errorf("%s must be a whole number, got %q", name, text)
	}
	mult := int64(1)
	switch name {
	case "MEMORY", "DISK":
		u := strings.ToUpper(v)
		for _, unit := range []struct {
			suffix string
			mult   int64
		}{{"TB", 1 << 20}, {"GB", 1 << 10}, {"MB", 1}, {"T", 1 << 20}, {"G", 1 << 10}, {"M", 1}} {
			if strings.HasSuffix(u, unit.suffix) {
				v, mult = strings.TrimSpace(v[:len(v)-len(unit.suffix)]), unit.mult
				break
			}
		}
	case "WALL_TIME":
		if len(v) > 0 {
			switch v[len(v)-1] {
			case 's':
				v = v[:len(v)-1]
			case 'm':
				v, mult = v[:len(v)-1], 60
			case 'h':
				v, mult = v[:len(v)-1], 3600
			case 'd':
				v, mult = v[:len(v)-1], 86400
			}
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return bad()
	}
	return n * mult, nil
}

// parseSize reads a file size in bytes, with an optional K, M, G or T
// (powers of 1024).
func ParseSize(text string) (int64, error) {
	v := strings.ToUpper(strings.TrimSpace(text))
	mult := int64(1)
	if n := len(v); n > 0 {
		if v[n-1] == 'B' && n > 1 && strings.ContainsRune("KMGT", rune(v[n-2])) {
			v = v[:n-1]
			n--
		}
		switch v[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			v = v[:n-1]
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("size must be a number of bytes such as 51274 or 10M, got %q", text)
	}
	return n * mult, nil
}
