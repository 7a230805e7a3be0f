// Package testkit is the tests' support, shared by the tests of every
// package: the private PostgreSQL and Redis servers a test binary starts
// for itself (or the ones PETSTORE_TEST_POSTGRES and PETSTORE_TEST_REDIS
// name), one free-address finder, one polling loop (Eventually, and Until
// for a wait that fails in its own words or not at all), one seeder of many
// pets in a SQLite file, and a webhook receiver that checks Standard
// Webhooks signatures with the algorithm written out on its own, and an
// OTLP/HTTP trace receiver (StartOTLP) that decodes exports with the
// OpenTelemetry protocol's types. The end-to-end tests of any package drive
// the petstore binary through it (PetstoreBinary, RunPetstore,
// LaunchPetstore), built from the module's root, and the programs started
// beside it (StartProcess, BalancerBinary, PebbleBinaries, StartS3).
//
// It is ordinary code, not a _test file, so that tests of several packages
// can import it; only tests do. It imports nothing of the project: only the
// standard library, the PostgreSQL and Redis clients and the OTLP protocol types.
package testkit
