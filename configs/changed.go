package configs

import (
	"fmt"
	"reflect"
	"strings"
)

// Changed lists the key paths whose values differ between two loaded
// configurations, as the file spells them ("api.listen",
// "workflows[0].tasks[1].name"; a list whose length changed is named
// whole). Values resolved from elsewhere (the DSN, tokens) are not keys
// and are not compared: compare those where they are used.
func Changed(a, b *Config) []string {
	var out []string
	changed(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem(), "", &out)
	return out
}

func changed(a, b reflect.Value, path string, out *[]string) {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				*out = append(*out, path)
			}
			return
		}
		changed(a.Elem(), b.Elem(), path, out)
	case reflect.Struct:
		t := a.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			changed(a.Field(i), b.Field(i), join(path, name), out)
		}
	case reflect.Slice:
		if a.Len() != b.Len() {
			*out = append(*out, path)
			return
		}
		for i := range a.Len() {
			changed(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, path)
		}
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
