package console

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxLine is the longest command line the console reads, in bytes; a
// longer one is refused whole (ErrTooLong) and the console goes on with
// the next line.
const MaxLine = 1024

// Errors of the command-line parser.
var (
	// ErrTooLong means the line is over MaxLine bytes.
	ErrTooLong = errors.New("console: line too long")
	// ErrQuote means a quoted word has no closing quote.
	ErrQuote = errors.New("console: unterminated quote")
	// ErrControl means the line holds a control character or is not
	// UTF-8.
	ErrControl = errors.New("console: control character or bad UTF-8 in line")
)

// JSONFlag, anywhere on a line, asks for the command's machine output.
const JSONFlag = "--json"

// Line is one parsed command line.
type Line struct {
	// Words are the command and its arguments, quotes removed; empty for
	// a blank line or a comment.
	Words []string
	// JSON is true when the line carries JSONFlag (which is not a word).
	JSON bool
}

// Parse splits a command line into words. Words are separated by spaces
// or tabs; a word may be quoted with "..." (where \" and \\ stand for "
// and \) or '...' (taken as is), so SSIDs and passwords may hold spaces.
// A line whose first word begins with # is a comment. A trailing CR is
// dropped. The flag --json (unquoted) may appear anywhere.
func Parse(s string) (Line, error) {
	var l Line
	s = strings.TrimSuffix(s, "\r")
	if len(s) > MaxLine {
		return l, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLong, len(s), MaxLine)
	}
	if !utf8.ValidString(s) {
		return l, ErrControl
	}
	for _, r := range s {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return l, fmt.Errorf("%w: %q", ErrControl, r)
		}
	}
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			break
		}
		if len(l.Words) == 0 && !l.JSON && s[i] == '#' {
			return Line{}, nil
		}
		var w strings.Builder
		quoted := false
		for i < len(s) && s[i] != ' ' && s[i] != '\t' {
			switch c := s[i]; c {
			case '"':
				quoted = true
				i++
				for {
					if i >= len(s) {
						return Line{}, ErrQuote
					}
					if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
						w.WriteByte(s[i+1])
						i += 2
						continue
					}
					if s[i] == '"' {
						i++
						break
					}
					w.WriteByte(s[i])
					i++
				}
			case '\'':
				quoted = true
				end := strings.IndexByte(s[i+1:], '\'')
				if end < 0 {
					return Line{}, ErrQuote
				}
				w.WriteString(s[i+1 : i+1+end])
				i += end + 2
			default:
				w.WriteByte(c)
				i++
			}
		}
		if !quoted && w.String() == JSONFlag {
			l.JSON = true
			continue
		}
		l.Words = append(l.Words, w.String())
	}
	return l, nil
}

// String is the line in canonical form: words quoted where needed, and
// --json last. Parse(l.String()) gives l back.
func (l Line) String() string {
	parts := make([]string, 0, len(l.Words)+1)
	for i, w := range l.Words {
		parts = append(parts, quoteWord(w, i == 0))
	}
	if l.JSON {
		parts = append(parts, JSONFlag)
	}
	return strings.Join(parts, " ")
}

// quoteWord quotes w when it would not read back as itself.
func quoteWord(w string, first bool) string {
	if w != "" && w != JSONFlag && !strings.ContainsAny(w, " \t\"'\\") && !(first && w[0] == '#') {
		return w
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(w); i++ {
		if w[i] == '"' || w[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(w[i])
	}
	b.WriteByte('"')
	return b.String()
}
