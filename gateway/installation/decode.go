package installation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/dmx"
)

// Pos is a place in a description file: 1-based line and column.
type Pos struct {
	Line, Col int
}

// Problem is one thing wrong with a description, at the place it was
// written (the zero Pos when the problem has no one place).
type Problem struct {
	Pos Pos
	Msg string
}

// ParseError lists every problem found in a description file, each with
// file:line:column. It wraps ErrInvalid.
type ParseError struct {
	File     string
	Problems []Problem
}

func (e *ParseError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		if p.Pos.Line > 0 {
			fmt.Fprintf(&b, "%s:%d:%d: %s", e.File, p.Pos.Line, p.Pos.Col, p.Msg)
		} else {
			fmt.Fprintf(&b, "%s: %s", e.File, p.Msg)
		}
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *ParseError) Unwrap() error { return ErrInvalid }

// decoder turns a YAML node tree into Go values strictly: every key must
// name a field, every value must have the field's type, no key twice, no
// anchors or aliases. It records where each value was written (by its
// dotted path) so later checks can point at it.
type decoder struct {
	problems []Problem
	pos      map[string]Pos
}

func (d *decoder) fail(n *yaml.Node, format string, args ...any) {
	if strings.HasPrefix(format, "%s: ") && len(args) > 0 && args[0] == "" {
		args[0] = "top level"
	}
	d.problems = append(d.problems, Problem{Pos{n.Line, n.Column}, fmt.Sprintf(format, args...)})
}

// nullable is a value that tells an explicit null from an absent key.
type nullable interface {
	setNull()
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return fmt.Sprintf("the string %q", clipText(n.Value))
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!null":
			return "null (nothing; a # starts a comment, so quote colours)"
		}
		return "a scalar " + n.ShortTag()
	}
	return "something else"
}

func clipText(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	case reflect.Pointer:
		return typeName(t.Elem())
	}
	return t.String()
}

// fieldsOf maps a struct's yaml keys to field indexes, in declaration order.
func fieldsOf(t reflect.Type) ([]string, map[string]int) {
	var names []string
	idx := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		names = append(names, name)
		idx[name] = i
	}
	return names, idx
}

// decode sets v (settable) from n. path is the dotted path of v.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		d.fail(n, "%s: anchors and aliases are not supported; write the value out", path)
		return
	}
	d.pos[path] = Pos{n.Line, n.Column}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" && path == "cuelists" {
		d.fail(n, "cuelists: null: write [] to remove every cue list, or leave the key out to leave them alone")
		return
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		if v.Kind() == reflect.Pointer {
			if nl, ok := reflect.New(v.Type().Elem()).Interface().(nullable); ok {
				nl.setNull()
				v.Set(reflect.ValueOf(nl))
				return
			}
			if v.Type().Elem().Kind() == reflect.Struct {
				v.SetZero() // an empty section
				return
			}
		}
		if v.Kind() == reflect.Map || v.Kind() == reflect.Slice {
			v.SetZero()
			return
		}
	}
	t := v.Type()
	if t == reflect.TypeFor[NullString]() {
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			d.fail(n, "%s: want a string or null, got %s", path, kindName(n))
			return
		}
		v.Set(reflect.ValueOf(NullString{Value: n.Value}))
		return
	}
	if t == reflect.TypeFor[time.Time]() {
		// A moment (a window's interval): RFC 3339, quoted or not.
		tm, err := time.Parse(time.RFC3339, n.Value)
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!str" && n.ShortTag() != "!!timestamp") || err != nil {
			d.fail(n, "%s: want a time (RFC 3339, 2026-03-10T01:00:00+01:00), got %s", path, kindName(n))
			return
		}
		v.Set(reflect.ValueOf(tm))
		return
	}
	if t == reflect.TypeFor[dmx.Patch]() || t == reflect.TypeFor[cue.List]() {
		d.decodeJSON(n, v, path)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		nv := reflect.New(t.Elem())
		d.decode(n, nv.Elem(), path)
		v.Set(nv)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.fail(n, "%s: want %s, got %s", path, typeName(t), kindName(n))
			return
		}
		names, idx := fieldsOf(t)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || (k.ShortTag() != "!!str" && k.ShortTag() != "!!int") {
				d.fail(k, "%s: a key must be a plain name, got %s", path, kindName(k))
				continue
			}
			if seen[k.Value] {
				d.fail(k, "%s: key %q given twice", path, k.Value)
				continue
			}
			seen[k.Value] = true
			fi, ok := idx[k.Value]
			if !ok {
				d.fail(k, "%s: unknown key %q (known: %s)", path, k.Value, strings.Join(names, ", "))
				continue
			}
			d.decode(val, v.Field(fi), join(path, k.Value))
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.fail(n, "%s: want %s, got %s", path, typeName(t), kindName(n))
			return
		}
		m := reflect.MakeMapWithSize(t, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" || k.Anchor != "" {
				d.fail(k, "%s: a key must be a name, got %s", path, kindName(k))
				continue
			}
			key := reflect.ValueOf(k.Value)
			if m.MapIndex(key).IsValid() {
				d.fail(k, "%s: key %q given twice", path, k.Value)
				continue
			}
			d.pos[join(path, k.Value)+"#key"] = Pos{k.Line, k.Column}
			ev := reflect.New(t.Elem()).Elem()
			d.decode(val, ev, join(path, k.Value))
			m.SetMapIndex(key, ev)
		}
		v.Set(m)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, "%s: want %s, got %s", path, typeName(t), kindName(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			hint := ""
			if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
				hint = " (quote it to make it a string)"
			}
			d.fail(n, "%s: want %s, got %s%s", path, typeName(t), kindName(n), hint)
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			d.fail(n, "%s: want a boolean (true or false), got %s", path, kindName(n))
			return
		}
		b, err := strconv.ParseBool(strings.ToLower(n.Value))
		if err != nil {
			d.fail(n, "%s: want true or false, got %q", path, n.Value)
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			d.fail(n, "%s: want an integer, got %s", path, kindName(n))
			return
		}
		var i int64
		if err := n.Decode(&i); err != nil {
			d.fail(n, "%s: integer %q out of range", path, clipText(n.Value))
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
			d.fail(n, "%s: want a number, got %s", path, kindName(n))
			return
		}
		var f float64
		if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.fail(n, "%s: want a finite number, got %q", path, clipText(n.Value))
			return
		}
		v.SetFloat(f)
	default:
		d.fail(n, "%s: cannot hold %s", path, t)
	}
}

// decodeJSON sets v from n read as the JSON v's own package takes
// (strictly: unknown fields refused), so a section is written in the
// description exactly as its API takes it. In a cue list a cue's number
// may be written bare (number: 1.5): it is taken as written.
func (d *decoder) decodeJSON(n *yaml.Node, v reflect.Value, path string) {
	val, ok := d.nodeValue(n, path)
	if !ok {
		return
	}
	if v.Type() == reflect.TypeFor[cue.List]() {
		if m, ok := val.(map[string]any); ok {
			if cues, ok := m["cues"].([]any); ok {
				for _, c := range cues {
					if cm, ok := c.(map[string]any); ok {
						if num, ok := cm["number"].(json.Number); ok {
							cm["number"] = string(num)
						}
					}
				}
			}
		}
	}
	b, err := json.Marshal(val)
	if err != nil {
		d.fail(n, "%s: %v", path, err)
		return
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v.Addr().Interface()); err != nil {
		d.fail(n, "%s: %s", path, strings.TrimPrefix(err.Error(), "json: "))
	}
}

var jsonNumberRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// nodeValue turns n into the value JSON would hold: mappings with string
// keys, lists, strings, numbers (json.Number), booleans and null.
func (d *decoder) nodeValue(n *yaml.Node, path string) (any, bool) {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		d.fail(n, "%s: anchors and aliases are not supported; write the value out", path)
		return nil, false
	}
	d.pos[path] = Pos{n.Line, n.Column}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		ok := true
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" || k.Anchor != "" {
				d.fail(k, "%s: a key must be a name, got %s", path, kindName(k))
				ok = false
				continue
			}
			if _, dup := m[k.Value]; dup {
				d.fail(k, "%s: key %q given twice", path, k.Value)
				ok = false
				continue
			}
			x, good := d.nodeValue(val, join(path, k.Value))
			ok = ok && good
			m[k.Value] = x
		}
		return m, ok
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		ok := true
		for i, c := range n.Content {
			x, good := d.nodeValue(c, fmt.Sprintf("%s[%d]", path, i))
			ok = ok && good
			s[i] = x
		}
		return s, ok
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, true
		case "!!str":
			return n.Value, true
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				d.fail(n, "%s: want true or false, got %q", path, clipText(n.Value))
				return nil, false
			}
			return b, true
		case "!!int":
			var i int64
			if err := n.Decode(&i); err != nil {
				d.fail(n, "%s: integer %q out of range", path, clipText(n.Value))
				return nil, false
			}
			return json.Number(strconv.FormatInt(i, 10)), true
		case "!!float":
			var f float64
			if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				d.fail(n, "%s: want a finite number, got %q", path, clipText(n.Value))
				return nil, false
			}
			if jsonNumberRE.MatchString(n.Value) {
				return json.Number(n.Value), true
			}
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), true
		}
	}
	d.fail(n, "%s: cannot hold %s", path, kindName(n))
	return nil, false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// sortProblems orders problems by place.
func sortProblems(ps []Problem) {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line - b.Pos.Line
		}
		return a.Pos.Col - b.Pos.Col
	})
}
