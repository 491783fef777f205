package sqlpods

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	_ "modernc.org/sqlite" // the driver steve's sqlcache uses
)

// Store is an in-memory SQLite of pods, in steve's shape: "pods" holds each
// object by key, "pods_fields" one column per field and an index per
// column. Each column's index ends with namespace and name, the tie-break
// of kubeindex's order, so that a sorted page is a walk of one index (a
// plain steve index on the column alone would sort every tie); the sort
// direction a question asks is the index's, and the two keys counts group
// by have an index of their own. The statistics are gathered (ANALYZE)
// once loaded.
//
// One connection answers every query (an in-memory database is private to
// its connection): a Store is safe for concurrent use, one query at a time.
type Store struct {
	db *sql.DB
}

// The schema: steve's object table (key, object) and fields table.
var schema = []string{
	`CREATE TABLE pods (key TEXT UNIQUE NOT NULL PRIMARY KEY, object BLOB)`,
	`CREATE TABLE pods_fields (
		key TEXT NOT NULL PRIMARY KEY REFERENCES pods(key) ON DELETE CASCADE,
		namespace TEXT NOT NULL, name TEXT NOT NULL, phase TEXT, status TEXT,
		ready REAL, restarts INTEGER, created INTEGER, ip TEXT, node TEXT)`,
}

// indexes are made after the load, as a bulk load should.
var indexes = []string{
	`CREATE INDEX pods_fields_namespace ON pods_fields(namespace, name)`,
	`CREATE INDEX pods_fields_phase ON pods_fields(phase, namespace, name)`,
	`CREATE INDEX pods_fields_status ON pods_fields(status, namespace, name)`,
	`CREATE INDEX pods_fields_ready ON pods_fields(ready, namespace, name)`,
	`CREATE INDEX pods_fields_restarts ON pods_fields(restarts DESC, namespace, name)`,
	`CREATE INDEX pods_fields_created ON pods_fields(created, namespace, name)`,
	`CREATE INDEX pods_fields_ip ON pods_fields(ip, namespace, name)`,
	`CREATE INDEX pods_fields_node ON pods_fields(node, namespace, name)`,
	`CREATE INDEX pods_fields_phase_node ON pods_fields(phase, node)`,
	`ANALYZE`,
}

// Open creates an empty store with steve's pragmas for a cache that is
// thrown away (no durability, temporary tables in memory).
func Open() (*Store, error) {
	db, err := sql.Open("sqlite", "file::memory:?_pragma=synchronous=off&_pragma=temp_store=2&_pragma=foreign_keys=on")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	for _, s := range schema {
		if _, err := db.Exec(s); err != nil {
			db.Close()
			return nil, fmt.Errorf("%s: %w", s, err)
		}
	}
	return &Store{db: db}, nil
}

// Close releases the database.
func (s *Store) Close() error { return s.db.Close() }

// Insert adds rows in one transaction.
func (s *Store) Insert(ctx context.Context, rows []Row) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	obj, err := tx.PrepareContext(ctx, `INSERT INTO pods (key, object) VALUES (?, ?)`)
	if err != nil {
		return err
	}
	fields, err := tx.PrepareContext(ctx, `INSERT INTO pods_fields
		(key, namespace, name, phase, status, ready, restarts, created, ip, node) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if _, err := obj.ExecContext(ctx, r.Key(), r.Object); err != nil {
			return fmt.Errorf("%s: %w", r.Key(), err)
		}
		if _, err := fields.ExecContext(ctx, r.Key(), r.Namespace, r.Name, r.Phase, r.Status, r.Ready, r.Restarts,
			r.Created, r.IP, r.Node); err != nil {
			return fmt.Errorf("%s: %w", r.Key(), err)
		}
	}
	return tx.Commit()
}

// Index builds the indexes and the planner's statistics; call it once,
// after the load.
func (s *Store) Index(ctx context.Context) error {
	for _, q := range indexes {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// Bytes is the database's size (its pages: tables and indexes).
func (s *Store) Bytes(ctx context.Context) (int64, error) {
	var pages, size int64
	if err := s.db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		return 0, err
	}
	if err := s.db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&size); err != nil {
		return 0, err
	}
	return pages * size, nil
}

// Page is a page of a question's answer: the objects in order, their keys,
// and how many objects match in all.
type Page struct {
	Total   int
	Keys    []string
	Objects [][]byte
}

// Page answers q from offset, at most limit rows, with the total number of
// matches, in one read transaction, as steve answers a list (its rows,
// then a COUNT(*) of the same query).
func (s *Store) Page(ctx context.Context, q Question, offset, limit int) (Page, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Page{}, err
	}
	defer tx.Rollback()
	var p Page
	rows, err := tx.QueryContext(ctx, `SELECT f.key, o.object FROM pods_fields f JOIN pods o ON o.key = f.key
		WHERE `+q.where+` ORDER BY `+q.orderBy+` LIMIT ? OFFSET ?`, append(q.args, limit, offset)...)
	if err != nil {
		return Page{}, err
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var obj []byte
		if err := rows.Scan(&key, &obj); err != nil {
			return Page{}, err
		}
		p.Keys, p.Objects = append(p.Keys, key), append(p.Objects, obj)
	}
	if err := rows.Err(); err != nil {
		return Page{}, err
	}
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pods_fields f WHERE `+q.where, q.args...).Scan(&p.Total); err != nil {
		return Page{}, err
	}
	return p, nil
}

// Group is the count of one pair of values (nil: no value).
type Group struct {
	Values [2]*string `json:"values"`
	Count  int        `json:"count"`
}

// Counts answers c: the count per pair of values, largest first, and the
// total.
func (s *Store) Counts(ctx context.Context, c CountQuestion) (total int, groups []Group, err error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+c.cols[0]+`, `+c.cols[1]+`, COUNT(*) FROM pods_fields
		GROUP BY `+c.cols[0]+`, `+c.cols[1]+` ORDER BY 3 DESC`)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var g Group
		var a, b sql.NullString
		if err := rows.Scan(&a, &b, &g.Count); err != nil {
			return 0, nil, err
		}
		for i, v := range []sql.NullString{a, b} {
			if v.Valid {
				g.Values[i] = &v.String
			}
		}
		total += g.Count
		groups = append(groups, g)
	}
	return total, groups, rows.Err()
}

// plan is SQLite's query plan of q's page, for tests and the report.
func (s *Store) plan(ctx context.Context, q Question) (string, error) {
	rows, err := s.db.QueryContext(ctx, `EXPLAIN QUERY PLAN SELECT f.key, o.object FROM pods_fields f JOIN pods o ON o.key = f.key
		WHERE `+q.where+` ORDER BY `+q.orderBy+` LIMIT ? OFFSET ?`, append(q.args, 100, 0)...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var steps []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return "", err
		}
		steps = append(steps, detail)
	}
	return strings.Join(steps, "; "), rows.Err()
}
