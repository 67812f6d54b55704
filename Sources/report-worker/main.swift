import Foundation

// The report-worker (ReportWorker.swift). Top-level code stays this one line: a closure written
// here would be main-actor isolated and trap when another thread runs it.
exit(await ReportWorker.run(environment: ProcessInfo.processInfo.environment))
