package server

import (
	"reflect"
	"strings"
	"testing"
)

// checkScanAgrees holds scanBatch to encoding/json: where the scanner
// accepts a body, encoding/json decodes the same queries from it.
func checkScanAgrees(t *testing.T, body string) (accepted bool) {
	t.Helper()
	got, ok := scanBatch([]byte(body))
	if !ok {
		return false
	}
	want, err := decodeBatch([]byte(body))
	if err != nil {
		t.Fatalf("%q: the scanner accepts what encoding/json refuses (%v)", body, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: the scanner reads %+v; encoding/json %+v", body, got, want)
	}
	return true
}

// TestScanBatchAgreesWithEncodingJSON: the common spellings are read by
// the scanner, as encoding/json reads them; every other one is left to
// encoding/json.
func TestScanBatchAgreesWithEncodingJSON(t *testing.T) {
	for _, body := range []string{
		`{"queries":[]}`, `{"queries":null}`, `{}`, " \n{ \"queries\" : [ { \"ip\" : \"10.0.0.1\" } ] }\n",
		`{"queries":[{"ip":"10.0.0.1"},{"ip":"::1","at":"2026-01-02T03:04:05Z","port":9100,"protocol":"UDP"}]}`,
		`{"queries":[{"ip":"10.0.0.1","at":1767323045.5,"port":"80"},{"ip":""},{"at":-0.5e+3}]}`,
	} {
		if !checkScanAgrees(t, body) {
			t.Errorf("%q: declined; expect it read by the scanner", body)
		}
	}
	for _, body := range []string{
		``, `[]`, `{"queries":{}}`, `{"queries":[],"x":1}`, `{"queries":[]} {}`, `{"queries":[]}]`, `{"Queries":[]}`,
		`{"queries":[],"queries":null}`, `{"queries":[{"IP":"10.0.0.1"}]}`, `{"queries":[{"ip":"10.0.0.1","ip":"10.0.0.2"}]}`,
		`{"queries":[{"ip":"10.0.0.\u0031"}]}`, `{"queries":[{"ip":"10.0.0.1é"}]}`, `{"queries":[{"ip":null}]}`,
		`{"queries":[{"ip":1}]}`, `{"queries":[{"at":01}]}`, `{"queries":[{"at":1.}]}`, `{"queries":[{"port":true}]}`,
		`{"queries":[{"port":null}]}`, `{"queries":[{"ip":"10.0.0.1"},]}`, `{"queries":[{"ip":"10.0.0.1"}`, `{"queries":[1]}`,
		`{"queries":[{"port":1x}]}`,
	} {
		if checkScanAgrees(t, body) {
			t.Errorf("%q: read by the scanner; expect it left to encoding/json", body)
		}
	}
}

// FuzzScanBatchAgreesWithEncodingJSON: whatever body the scanner reads,
// encoding/json reads the same queries from.
func FuzzScanBatchAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{`{"queries":[{"ip":"10.0.0.1"}]}`, `{"queries":[{"ip":"::1","at":1.5,"port":"80","protocol":"udp"}]}`,
		`{"queries":[{"ip":"","at":-0e1,"port":9}]}`, `{"queries":null}`, `{"queries":[ ]} `, `{`,
		`{"queries":[` + strings.Repeat(`{"ip":"10.0.0.1"},`, 20) + `{"ip":"10.0.0.1"}]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		checkScanAgrees(t, body)
	})
}

// scanBatch is scanBatchInto without a pooled slice.
func scanBatch(body []byte) (queries []batchQuery, ok bool) {
	return scanBatchInto(body, nil)
}
