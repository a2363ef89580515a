// The query and path parameters of the routes, checked before any
// database call.

package api

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// maxIntParam caps integer query parameters (limit: at most 10,000 rows
// per request).
const maxIntParam = 10000

// only answers 400 to a request with a query parameter the route does
// not take, naming it and those it takes.
func only(next http.HandlerFunc, names ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k := range r.URL.Query() {
			if !slices.Contains(names, k) {
				takes := "this route takes none"
				if len(names) > 0 {
					takes = "this route takes " + strings.Join(names, ", ")
				}
				writeProblem(w, http.StatusBadRequest, "query parameter "+quoteShort(k)+": unknown", takes)
				return
			}
		}
		next(w, r)
	}
}

// intParam reads a positive integer query parameter (at most 10000).
func intParam(w http.ResponseWriter, r *http.Request, name string, def int) (int, bool) {
	v, given := queryValue(r, name)
	if !given {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxIntParam {
		writeProblem(w, http.StatusBadRequest, "query parameter "+name+": not an integer from 1 to "+strconv.Itoa(maxIntParam), "got "+quoteShort(v))
		return 0, false
	}
	return n, true
}

// idParam reads a non-negative 64-bit id query parameter (default 0).
func idParam(w http.ResponseWriter, r *http.Request, name string) (int64, bool) {
	v, given := queryValue(r, name)
	if !given {
		return 0, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		writeProblem(w, http.StatusBadRequest, "query parameter "+name+": not a non-negative integer", "got "+quoteShort(v))
		return 0, false
	}
	return n, true
}

// pathID reads a positive 64-bit id path parameter.
func pathID(w http.ResponseWriter, r *http.Request, name string) (int64, bool) {
	v := r.PathValue(name)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || strconv.FormatInt(n, 10) != v {
		writeProblem(w, http.StatusBadRequest, "path parameter "+name+": not a positive integer in canonical form", "got "+quoteShort(v))
		return 0, false
	}
	return n, true
}

// queryValue returns query parameter name and whether it was given (the
// edge has refused repeated ones).
func queryValue(r *http.Request, name string) (string, bool) {
	q := r.URL.Query()
	return q.Get(name), q.Has(name)
}
