// Package replicate streams the SQLite database's changes off the machine
// while the server runs, and writes a database back from them: Litestream,
// as a library, with its S3 and file replica clients only (docs/production.md,
// "Backup and restore"; docs/design.md, "Replication and the WAL").
package replicate
