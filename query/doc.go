// Package query reads and evaluates questions about the objects of one
// resource: filters, sorts, projections and grouped counts. It is pure:
// it parses parameters and evaluates them on objects' JSON, and knows
// nothing of informers, stores or HTTP. The cache chooses the candidates
// and pages them; the server reads the parameters and writes the answer.
//
// # Keys
//
// Anywhere a key is accepted it is one of:
//
//   - a Table column of the resource as kubectl prints it, named in lower
//     case with spaces as hyphens (a pod's name, ready, status, restarts,
//     age, ip, node, nominated-node, readiness-gates; a CRD's printer
//     columns); compared as the column's type: integer and number columns
//     as numbers, Ready ("2/3") as the fraction, Restarts ("3 (5m ago)")
//     as the count, Age as a duration (from metadata.creationTimestamp,
//     exact), other date columns as the duration or time they print, the
//     rest as text;
//   - "namespace", "name" and "age", for every resource;
//   - otherwise a gjson path into the object, as custom indexes take them
//     (status.phase, metadata.labels.app, spec.containers.#.image with
//     arrays flattened); a leading "." forces a path where a column has
//     the same name (.status is the member, status the column). A path's
//     numbers compare as numbers, everything else as text.
//
// # Filters
//
// See Schema.ParseFilter for the grammar. Terms: key (has a value), !key
// (has none), = == != < <= > >= ~ (case-insensitive substring), in (…)
// and notin (…). The terms of one filter parameter are ORed, the
// parameters ANDed. Over several values (a path through arrays) a
// positive term holds when one value satisfies it, != and notin when no
// value is equal. A missing value satisfies no comparison but != and
// notin.
//
// # Sorts
//
// sort=key[,key…], "-" before a key for descending; ties are broken by
// namespace then name, ascending; the first value of a key is compared;
// objects without a value come last in either direction.
//
// # Projections
//
// Schema.ParseFields reads fields=: member paths are kept where they are
// in the object; Table columns are written as their printed cells under
// the item's ColumnsMember, beside the object's own members.
//
// # Live windows
//
// A window (a query whose page and counts are kept current as events
// arrive) is built from the same parts: Filter.Match decides whether an
// event's object enters or leaves it, SortValues and CompareSorted give
// its position in an ordered index, and Counter's groups are adjusted by
// the old and the new object's group.
package query
