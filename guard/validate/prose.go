package validate

import (
	"bytes"
	"strings"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// A definition holds two kinds of strings. Its prose (description, title,
// names, a schema's property descriptions, annotations, _meta, any member
// yet to come) is what the model reads about the tool, and reads as
// instructions. Its data is what the model is offered to use: a JSON
// Schema's default, enum, const and examples values, and a listed
// resource's address (uri, uriTemplate); the argument side judges such a
// value when a call or a read uses it (a careless server's default of
// ~/.aws/credentials is refused as a path then, see docs/compat.md).
// Only the positions named here are data: everything else, an unknown
// keyword or member included, is prose.

// schemaData are the JSON Schema keywords whose values are data.
var schemaData = map[string]bool{"default": true, "enum": true, "const": true, "examples": true}

// schemaMaps are the keywords whose value maps names to schemas.
var schemaMaps = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true, "dependentSchemas": true}

// schemaSubs are the keywords whose value is a schema or an array of
// schemas.
var schemaSubs = map[string]bool{
	"items": true, "additionalItems": true, "prefixItems": true, "contains": true,
	"additionalProperties": true, "unevaluatedProperties": true, "unevaluatedItems": true, "propertyNames": true,
	"not": true, "if": true, "then": true, "else": true, "allOf": true, "anyOf": true, "oneOf": true,
	"contentSchema": true,
}

// definitionProse returns the prose of one definition (a tool, prompt,
// resource or resource template as listed): every string and key of it,
// one a line, in the order written, but the data (see above).
func definitionProse(raw []byte) string {
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return modelText(raw)
	}
	var b strings.Builder
	jsonrpc.Members(raw, func(key string, val jsonrpc.Span) bool {
		b.WriteString(key)
		b.WriteByte('\n')
		v := val.In(raw)
		switch key {
		case "inputSchema", "outputSchema":
			schemaProse(&b, v)
		case "uri", "uriTemplate":
			if v[0] != '"' { // an address is a string; anything else is read
				b.WriteString(modelText(v))
			}
		default:
			b.WriteString(modelText(v))
		}
		return true
	})
	return b.String()
}

// schemaProse writes the prose of the JSON Schema v (an object, a boolean
// or, where a keyword takes several, an array of schemas).
func schemaProse(b *strings.Builder, v []byte) {
	switch v[0] {
	case '[':
		jsonrpc.Elements(v, func(el jsonrpc.Span) bool {
			schemaProse(b, el.In(v))
			return true
		})
		return
	case '{':
	default:
		b.WriteString(modelText(v))
		return
	}
	jsonrpc.Members(v, func(key string, val jsonrpc.Span) bool {
		b.WriteString(key)
		b.WriteByte('\n')
		sub := val.In(v)
		switch {
		case schemaData[key]:
		case schemaMaps[key] && sub[0] == '{':
			jsonrpc.Members(sub, func(name string, s jsonrpc.Span) bool {
				b.WriteString(name)
				b.WriteByte('\n')
				schemaProse(b, s.In(sub))
				return true
			})
		case schemaSubs[key]:
			schemaProse(b, sub)
		default:
			b.WriteString(modelText(sub))
		}
		return true
	})
}
