"""The ApplicationMaster and what it decides with: its gangs and their attempts, their
placement on its view of the cluster, acquisition and launch, the RM conversation, the
retry scope, the journal and recovery from it."""
