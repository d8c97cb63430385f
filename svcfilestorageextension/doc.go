//go:generate mdatagen metadata.yaml

// Package svcfilestorageextension is the distribution's `svc_file_storage` extension: contrib's
// filestorage extension (its keys and files) under a type of its own, with one directory per
// collector instance enforced at start, exporters' queues laid out so that bbolt does not rewrite
// the queued items at every write (spacers.go), the storage's metrics (telemetry.go), and, with
// the experimental large_value_files, large values kept in append-only files with a pointer to
// them in bbolt (valuefiles.go).
//
// Two collectors on one storage directory would otherwise fail late and obscurely: the second one's
// exporter queue waits for the first one's bbolt file lock and fails with a bare "timeout". This
// extension takes an exclusive lock on the directory when it starts, before any pipeline, and
// refuses to start with an error that names the directory and says to give each instance its own.
package svcfilestorageextension // import "github.com/svc/svc-collector/svcfilestorageextension"
