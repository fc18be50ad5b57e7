package installation

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("installation.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("installation.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSchemaInDocs keeps the served schema and the one in docs/ the same.
func TestSchemaInDocs(t *testing.T) {
	docs, err := os.ReadFile("../../docs/installation.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(docs, Schema) {
		t.Fatal("docs/installation.schema.json differs from gateway/installation/schema.json: copy it")
	}
}

// TestSchemaAgreesWithParse: every good description and every canonical
// JSON the parser writes validates; descriptions with unknown keys or
// wrong types are refused by the schema as by Parse.
func TestSchemaAgreesWithParse(t *testing.T) {
	s := compileSchema(t)
	files, _ := filepath.Glob("testdata/parse/*.*")
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasSuffix(f, ".err") || name == "bad-syntax.yaml" || name == "bad-empty.yaml" || name == "bad-two-docs.yaml" {
			continue
		}
		data, _ := os.ReadFile(f)
		var v any
		if err := yaml.Unmarshal(data, &v); err != nil {
			continue // refused by YAML itself (keys given twice)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			continue // YAML the JSON form cannot hold (anchors' maps)
		}
		inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		verr := s.Validate(inst)
		switch {
		case strings.HasPrefix(name, "good-"):
			if verr != nil {
				t.Errorf("%s: schema refuses a good description: %v", name, verr)
			}
			d, err := Parse(name, data)
			if err != nil {
				t.Fatal(err)
			}
			canon, _ := jsonschema.UnmarshalJSON(bytes.NewReader(d.JSON()))
			if err := s.Validate(canon); err != nil {
				t.Errorf("%s: schema refuses the canonical JSON: %v", name, err)
			}
		case name == "bad-unknown-key.yaml" || name == "bad-types.yaml" || name == "bad-json.json":
			if verr == nil {
				t.Errorf("%s: schema accepts a description Parse refuses", name)
			}
		}
	}
}
