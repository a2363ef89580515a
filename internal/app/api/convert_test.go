package api

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/nodes"
)

// TestWireCopiesEveryField: each conversion of wire.go fills every field
// of its apitype type from the domain's field of the same name, at every
// depth (a domain value with every field set, converted, holds the same
// values): a field added to an answer cannot be left unset.
func TestWireCopiesEveryField(t *testing.T) {
	for name, conv := range map[string]func(t *testing.T) (domain, wire any){
		"Node":         convert(wireNode),
		"GradeChange":  convert(wireGradeChange),
		"PassStats":    convert(WirePassStats),
		"Pause":        convert(wirePause),
		"CheckResult":  convert(wireCheckResult),
		"WorkflowPlan": convert(wirePlan),
		"Run":          convert(wireRun),
		"RunDetail":    convert(wireRunDetail),
		"Event":        convert(wireEvent),
		"Hold":         convert(wireHold),
		"WaitingRetry": convert(wireWaiting),
		"HoldResult":   convert(wireHoldResult),
		"RetryResult":  convert(wireRetryResult),
		"InstanceView": convert(wireInstance),
		"RetryStats":   convert(wireRetryStats),
	} {
		t.Run(name, func(t *testing.T) {
			d, w := conv(t)
			if err := same(reflect.ValueOf(d), reflect.ValueOf(w), name); err != nil {
				t.Error(err)
			}
		})
	}
	// A nil list stays null, an empty one [].
	for _, tc := range []struct {
		in   []nodes.Node
		want string
	}{{nil, "null"}, {[]nodes.Node{}, "[]"}} {
		if b, _ := json.Marshal(wireAll(tc.in, wireNode)); string(b) != tc.want {
			t.Errorf("%#v sent as %s, want %s", tc.in, b, tc.want)
		}
	}
}

// convert returns a test case of f: a domain value with every field set,
// and f's conversion of it.
func convert[D, W any](f func(D) W) func(t *testing.T) (any, any) {
	return func(_ *testing.T) (any, any) {
		var d D
		n := 0
		fill(reflect.ValueOf(&d).Elem(), &n)
		return d, f(d)
	}
}

var timeType = reflect.TypeFor[time.Time]()

// fill sets every exported field reachable from v to a value of its own
// (lists get one element).
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprint("s", *n))
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(*n))
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), n)
	case reflect.Struct:
		if v.Type() == timeType {
			v.Set(reflect.ValueOf(time.Unix(int64(*n), 0).UTC()))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	}
}

// same says where wire w differs from domain d: each field of w against
// d's field of the same name.
func same(d, w reflect.Value, path string) error {
	if d.Kind() == reflect.Pointer || w.Kind() == reflect.Pointer {
		if d.Kind() != w.Kind() || d.IsNil() != w.IsNil() {
			return fmt.Errorf("%s: %s against %s", path, d.Type(), w.Type())
		}
		if d.IsNil() {
			return nil
		}
		return same(d.Elem(), w.Elem(), path)
	}
	switch w.Kind() {
	case reflect.Struct:
		if w.Type() == timeType {
			if d.Type() != timeType || !d.Interface().(time.Time).Equal(w.Interface().(time.Time)) {
				return fmt.Errorf("%s: %v, want %v", path, w, d)
			}
			return nil
		}
		for _, f := range reflect.VisibleFields(w.Type()) {
			if f.Anonymous || !f.IsExported() {
				continue
			}
			df := d.FieldByName(f.Name)
			if !df.IsValid() {
				return fmt.Errorf("%s.%s: the domain's %s has no such field", path, f.Name, d.Type())
			}
			if err := same(df, w.FieldByIndex(f.Index), path+"."+f.Name); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		if d.Kind() != reflect.Slice || d.Len() != w.Len() || d.IsNil() != w.IsNil() {
			return fmt.Errorf("%s: %d elements, want %d", path, w.Len(), d.Len())
		}
		for i := range w.Len() {
			if err := same(d.Index(i), w.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if fmt.Sprint(d.Interface()) != fmt.Sprint(w.Interface()) || d.Kind() != w.Kind() {
		return fmt.Errorf("%s: %v, want %v", path, w, d)
	}
	return nil
}

// TestAnswersAreWireTypes: the answers hold apitype's own structs (and
// time.Time) only; a named type of another module package is a string
// (a domain enumeration: nodes.Status, recovery.Cause...) with no JSON
// of its own, so that its JSON is its text.
func TestAnswersAreWireTypes(t *testing.T) {
	for _, p := range notWire(answerTypes...) {
		t.Error(p)
	}
	// The check sees a domain struct (and lets the standard library's
	// types by).
	if p := notWire(reflect.TypeFor[[]health.Pause](), reflect.TypeFor[time.Month]()); len(p) != 1 {
		t.Errorf("a domain struct in an answer: %q, want one problem", p)
	}
	if p := notWire(reflect.TypeFor[struct{ D time.Duration }]()); len(p) != 1 {
		t.Errorf("a struct of no package: %q, want one problem", p)
	}
}

// notWire says which types reachable from types are not wire types.
func notWire(types ...reflect.Type) []string {
	marshalers := []reflect.Type{reflect.TypeFor[json.Marshaler](), reflect.TypeFor[encoding.TextMarshaler]()}
	seen := map[reflect.Type]bool{}
	var problems []string
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		if seen[typ] || typ == timeType {
			return
		}
		seen[typ] = true
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			walk(typ.Elem())
		case reflect.Struct:
			if !strings.HasSuffix(typ.PkgPath(), "/internal/app/api/apitype") {
				problems = append(problems, fmt.Sprintf("%s (of %q) in an answer: answers hold apitype's types", typ, typ.PkgPath()))
				return
			}
			for i := range typ.NumField() {
				walk(typ.Field(i).Type)
			}
		case reflect.String:
			for _, m := range marshalers {
				if typ.PkgPath() != "" && typ.Implements(m) {
					problems = append(problems, fmt.Sprintf("%s in an answer has a JSON of its own (%s)", typ, m))
				}
			}
		default:
			if std := !strings.Contains(strings.Split(typ.PkgPath(), "/")[0], "."); !std {
				problems = append(problems, fmt.Sprintf("%s in an answer: a named type of %s that is not a string", typ, typ.PkgPath()))
			}
		}
	}
	for _, typ := range types {
		walk(typ)
	}
	return problems
}
