// Package jsonx encodes the bodies of the HTTP API and the CLI's -o json
// by one rule: every documented field is always present. A field that
// has no value is null; false, 0 and "" are sent only where they are
// values. Pointers, slices and maps are null when nil, as encoding/json
// sends them; a field whose Go type has no nil (a string, a time.Time)
// and whose zero value means "none" is tagged `null:"zero"`, and its
// type's MarshalJSON calls Marshal, which sends it as null when zero.
//
// No field of a type sent on the wire carries omitempty or omitzero: a
// script could not tell a field left out from one this version does not
// have. (Request bodies, which clients send, may: see apitype.HoldsRequest.)
package jsonx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// NullTag is the struct tag key of Marshal: `null:"zero"` sends the
// field as null when it holds its type's zero value.
const NullTag = "null"

// Marshal encodes struct v (or a pointer to one) as encoding/json does,
// with its fields in order and the fields of embedded structs in place,
// except that a field tagged `null:"zero"` is null when zero. It is the
// body of the MarshalJSON method of such a type (it does not call v's
// own MarshalJSON, so it does not recurse); the fields' values are
// encoded by encoding/json, with their own MarshalJSON methods.
func Marshal(v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return []byte("null"), nil
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return nil, fmt.Errorf("jsonx: Marshal of %s, want a struct", rv.Type())
	}
	var b bytes.Buffer
	b.WriteByte('{')
	seen := map[string]bool{}
	if err := fields(&b, rv, seen); err != nil {
		return nil, err
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func fields(b *bytes.Buffer, v reflect.Value, seen map[string]bool) error {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			// Embedded: its fields in place, as encoding/json does.
			if err := fields(b, v.Field(i), seen); err != nil {
				return err
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if opts != "" {
			return fmt.Errorf("jsonx: %s.%s: option %q: every field is sent (tag %s:\"zero\" for a null)", t, f.Name, opts, NullTag)
		}
		if name == "" {
			name = f.Name
		}
		if seen[name] {
			return fmt.Errorf("jsonx: %s: field %q given twice", t, name)
		}
		seen[name] = true
		fv := v.Field(i)
		val := []byte("null")
		if f.Tag.Get(NullTag) != "zero" || !fv.IsZero() {
			var err error
			if val, err = json.Marshal(fv.Interface()); err != nil {
				return fmt.Errorf("jsonx: %s.%s: %w", t, f.Name, err)
			}
		}
		if len(seen) > 1 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(name)
		b.Write(key)
		b.WriteByte(':')
		b.Write(val)
	}
	return nil
}

var timeType = reflect.TypeFor[time.Time]()

// Missing returns the fields of type t that data (t's JSON) leaves out,
// at every depth, as paths ("status.node.reason", "[2].grade_reason"):
// empty when data follows the rule. A null is present.
func Missing(t reflect.Type, data []byte) ([]string, error) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	var missing []string
	walk(t, v, "", &missing)
	return missing, nil
}

func walk(t reflect.Type, v any, path string, missing *[]string) {
	if v == nil {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if t == timeType || !ok {
			return
		}
		for i := range t.NumField() {
			walkField(t.Field(i), obj, path, missing)
		}
	case reflect.Slice, reflect.Array:
		if list, ok := v.([]any); ok {
			for i, e := range list {
				walk(t.Elem(), e, fmt.Sprintf("%s[%d]", path, i), missing)
			}
		}
	case reflect.Map:
		if obj, ok := v.(map[string]any); ok {
			for k, e := range obj {
				walk(t.Elem(), e, path+"."+k, missing)
			}
		}
	}
}

func walkField(f reflect.StructField, obj map[string]any, path string, missing *[]string) {
	tag := f.Tag.Get("json")
	name, _, _ := strings.Cut(tag, ",")
	switch {
	case tag == "-":
		return
	case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
		for i := range f.Type.NumField() {
			walkField(f.Type.Field(i), obj, path, missing)
		}
		return
	case !f.IsExported():
		return
	case name == "":
		name = f.Name
	}
	p := strings.TrimPrefix(path+"."+name, ".")
	e, ok := obj[name]
	if !ok {
		*missing = append(*missing, p)
		return
	}
	walk(f.Type, e, p, missing)
}
