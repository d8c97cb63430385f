// Package svcscoreconnector is the svcscore connector: it turns the scoring events an application
// emits, on spans (traces → logs) or as log records (logs → logs), into svc score records
// (pkg/scorerecord) for the svc exporter to send to POST /api/public/scores.
//
//go:generate go tool mdatagen metadata.yaml
package svcscoreconnector
