// Package jx parses and evaluates JX, the superset of JSON that CCTools
// uses for Makeflow workflows (makeflow --jx) and its other tools: JSON
// values plus symbols bound by a context, Python-like operators, built-in
// functions and list comprehensions. The language is that of CCTools 9.9
// (Debian's coop-computing-tools, whose jx2json the tests compare with),
// read from its JX reference manual.
//
// Parse turns source text into an Expr whose nodes know their
// file:line:column; Eval evaluates it against a Scope of bound names;
// EvalDocument does so for a whole document, whose top-level "define"
// object binds names for the rest of it. Errors of both carry the position
// of the construct they concern (*Error).
//
// Values are Go values: nil (null), bool, int64, float64, string, *List
// and *Object. Lists and objects remember where their constructor was
// written, so that a program reading an evaluated document (a Makeflow
// rule) can say where a value came from.
//
// Where CCTools 9.9 departs from its own manual, this package follows the
// manual:
//   - binary operators associate to the left (CCTools 9.9 computes 10-2-3
//     as 10-(2-3)), and "and" binds tighter than "or", "not" looser than
//     comparisons;
//   - like(STRING, REGEX) takes the string first (CCTools 9.9 takes the
//     regular expression first);
//   - == and != compare objects too (CCTools 9.9 refuses);
//   - "and" and "or" do not evaluate their right side when the left one
//     decides (as later CCTools releases do).
//
// It also differs where CCTools' behaviour is an accident of its C
// implementation: text after the expression is an error rather than
// ignored, strings are UTF-8 throughout (\u escapes beyond ASCII are
// accepted), object keys must be strings, listdir returns its names
// sorted, fetch evaluates what it fetches in an empty context, template
// evaluates a defined name it refers to, and a range longer than
// MaxRangeLen, or a name defined in terms of itself, is an error rather
// than exhausting memory or the stack.
//
// The package does not provide CCTools' later additions (method-call
// syntax a.f(), dictionary comprehensions, anaphoric expressions, the
// conditional expression, where()) nor its Error{...} literal syntax;
// error(EXPR) raises an error.
package jx
