package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
)

// field is one key and value of people's output.
type field struct{ key, value string }

// flatten turns a JSON object into dotted keys in the order the object
// has them: nested objects become a.b, arrays of plain values are joined
// with ", ", other arrays are numbered a[0].b; null and empty arrays are
// "-".
func flatten(raw []byte) []field {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out []field
	var walk func(prefix string) error
	walk = func(prefix string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch d := tok.(type) {
		case json.Delim:
			switch d {
			case '{':
				for dec.More() {
					kt, err := dec.Token()
					if err != nil {
						return err
					}
					k, _ := kt.(string)
					if prefix != "" {
						k = prefix + "." + k
					}
					if err := walk(k); err != nil {
						return err
					}
				}
				_, err := dec.Token()
				return err
			case '[':
				var plain []string
				mixed := false
				for i := 0; dec.More(); i++ {
					before := len(out)
					if err := walk(fmt.Sprintf("%s[%d]", prefix, i)); err != nil {
						return err
					}
					if len(out) == before+1 && out[before].key == fmt.Sprintf("%s[%d]", prefix, i) && !mixed {
						plain = append(plain, out[before].value)
						out = out[:before]
					} else {
						mixed = true
					}
				}
				if !mixed {
					v := strings.Join(plain, ", ")
					if v == "" {
						v = "-"
					}
					out = append(out, field{prefix, v})
				}
				_, err := dec.Token()
				return err
			}
		case nil:
			out = append(out, field{prefix, "-"})
		case string:
			if d == "" {
				d = `""`
			}
			out = append(out, field{prefix, d})
		default:
			out = append(out, field{prefix, fmt.Sprint(d)})
		}
		return nil
	}
	if err := walk(""); err != nil {
		return []field{{"reply", string(raw)}}
	}
	return out
}

// pick keeps the fields named (in that order), all when keys is empty;
// a key ending in ".*" keeps every field under it.
func pick(fs []field, keys ...string) []field {
	if len(keys) == 0 {
		return fs
	}
	var out []field
	for _, k := range keys {
		for _, f := range fs {
			if f.key == k || strings.HasSuffix(k, ".*") && strings.HasPrefix(f.key, strings.TrimSuffix(k, "*")) {
				out = append(out, f)
			}
		}
	}
	return out
}

// table writes rows aligned in columns, two spaces apart.
func table(rows [][]string) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		lines = append(lines, strings.TrimRight(l, " "))
	}
	return strings.Join(lines, "\n")
}

// fields writes key value lines aligned.
func fields(fs []field) string {
	rows := make([][]string, len(fs))
	for i, f := range fs {
		rows[i] = []string{f.key, f.value}
	}
	return table(rows)
}

// show is the people's output of a JSON reply: the fields keys picks.
func show(raw []byte, keys ...string) string {
	if len(raw) == 0 {
		return ""
	}
	return fields(pick(flatten(raw), keys...))
}

// quoteIfNeeded shows a string so spaces stay visible.
func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, " \t") {
		return strconv.Quote(s)
	}
	return s
}
