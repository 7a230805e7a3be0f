// Package petcopy is the pets as the API reads them: a copy of every pet in
// memory (Cache), filled in the background after a start and followed on a
// database that other servers write too, that answers listPets and getPet
// as encoded JSON; the creates, which share commits (group commit) and
// reach the copy before their 201; the pages of listPets that can no
// longer change, kept as their bytes (Pages); and what a page is written
// with: the pet's JSON, the query, the cursor and the next link.
//
// It imports only the domain (whose PetStore and IdempotencyStore it is
// given), the batcher and the JSON string writer: never the store, which
// only its tests open, nor net/http. The handlers are the root's.
package petcopy
