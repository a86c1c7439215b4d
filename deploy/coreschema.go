package deploy

// CoreSchemaAnnotation is the annotation on the core's Deployment
// (deploy/core) naming the last schema version of the core's store, its
// last migration, that the release's core knows, as a decimal number. A
// core refuses a record migrated past what it knows, so `openfief platform
// upgrade` compares the installed Deployment's with the new overlay's
// before applying anything. It is on the Deployment, not its pod template:
// changing it restarts nothing.
const CoreSchemaAnnotation = "openfief.io/core-schema"

// CoreDeployment is the core's Deployment in the openfief namespace.
const CoreDeployment = "openfief-core"
