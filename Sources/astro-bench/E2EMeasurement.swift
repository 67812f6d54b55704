import AMQP
import AstroCLISupport
import AstroDomain
import Foundation
import UUIDText

/// One end-to-end measurement, the same for `e2e --type` and `e2e --mix`: starts the worker
/// processes, publishes the jobs in confirmed batches, and times each job from its publish to
/// the event its worker's transaction committed.
struct E2EMeasurement {
    /// The jobs of one kind in a measurement: their queue and their bodies.
    struct JobKind {
        var routingKey: String
        var bodies: JobBodyGenerator
    }

    /// What one measurement found, with one report per job kind in the order of `kinds`.
    struct Result {
        var reports: [BenchTimes.Report]
        /// The largest resident memory any worker process had at a sample.
        var peakKilobytes: Int
        /// Jobs per database commit, from the workers' `/metrics` (0 when none answered).
        var jobsPerCommit: Double
    }

    var kinds: [JobKind]
    /// The index in `kinds` of the job published at each position of the run, so a mix is
    /// interleaved the same way every time.
    var kindOfJob: (Int) -> Int
    var count: Int
    /// Jobs per confirmed publish batch.
    var window: Int
    /// Jobs per second at most, or nil to publish as fast as the broker confirms.
    var rate: Int?
    /// Seconds to wait for the outcomes once everything is published.
    var timeout: Int
    /// The events that end a job, successes and failures, of every kind.
    var doneEvents: [EventType]
    /// The private event queue's name starts with this (a random suffix follows).
    var eventQueuePrefix: String
    var workerBinaries: [String]
    var workerEnvironment: [String: String]
    /// Publishing waits until each of these queues has at least that many consumers.
    var requiredConsumers: [(queue: String, consumers: Int)]
    /// Who did not start consuming, for the error when they don't ("the chart-worker processes").
    var workersDescription: String

    /// Runs the measurement; the workers are stopped and the event queue deleted before it returns
    /// or throws.
    /// - Parameter publisher: connected, with the jobs' queues declared (and purged) and, for
    ///   report requests, the credits seeded.
    /// - Throws: `CommandFailure` when the workers do not start consuming within 60 s or not every
    ///   job has an outcome within `timeout` seconds.
    func run(publisher: AMQPPublisher, connection: ConnectionOptions) async throws -> Result {
        let eventQueue = "\(eventQueuePrefix).\(UUID().lowercasedText.prefix(8))"
        try await publisher.declare(
            Topology(
                queues: [QueueSpec(name: eventQueue, durable: false, exclusive: false, autoDelete: false)],
                bindings: doneEvents.map {
                    BindingSpec(queue: eventQueue, exchange: BrokerNames.eventsExchange, routingKey: $0.rawValue)
                }
            )
        )
        let workers: [BenchWorker]
        do {
            workers = try BenchWorkers.startWithHealthPorts(workerBinaries, environment: workerEnvironment)
        } catch {
            try? await publisher.deleteQueue(eventQueue)
            throw error
        }
        do {
            try await waitUntilConsuming(publisher: publisher)
            let result = try await timeJobs(
                workers: workers,
                eventQueue: eventQueue,
                publisher: publisher,
                connection: connection
            )
            BenchWorkers.stop(workers.map(\.process))
            try? await publisher.deleteQueue(eventQueue)
            return result
        } catch {
            BenchWorkers.stop(workers.map(\.process))
            try? await publisher.deleteQueue(eventQueue)
            throw error
        }
    }

    private func waitUntilConsuming(publisher: AMQPPublisher) async throws {
        let started = ContinuousClock.now
        while true {
            var ready = true
            for required in requiredConsumers
            where try await publisher.queueState(required.queue).consumerCount < required.consumers {
                ready = false
            }
            if ready { return }
            guard ContinuousClock.now - started < .seconds(60) else {
                throw CommandFailure("\(workersDescription) did not start consuming within 60 s")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Publishes every job and collects the outcome events until each job has one or the time is up.
    private func timeJobs(
        workers: [BenchWorker],
        eventQueue: String,
        publisher: AMQPPublisher,
        connection: ConnectionOptions
    ) async throws -> Result {
        var jobsOfKind = Array(repeating: 0, count: kinds.count)
        for index in 0..<count { jobsOfKind[kindOfJob(index)] += 1 }
        let times = jobsOfKind.map { BenchTimes(count: $0) }
        let total = count
        let finished: @Sendable () -> Int = { times.reduce(0) { $0 + $1.finishedCount } }

        let consumer = AMQPConsumer(
            configuration: try connection.amqpConfiguration(),
            topology: .empty,
            queues: [eventQueue],
            prefetch: 500,
            logger: connection.logger
        )
        try await consumer.start()
        let collector = Task { await Self.collectOutcomes(from: consumer, into: times, total: total) }
        let peakMemory = PeakMemory(pids: workers.map(\.process.processIdentifier))
        let sampler = Task {
            while !Task.isCancelled {
                peakMemory.sample()
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
        let firstPublish = ContinuousClock.now
        let progress = Task {
            while !Task.isCancelled {
                BenchProgress.draw(done: finished(), total: total, since: firstPublish)
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
        defer {
            progress.cancel()
            sampler.cancel()
            collector.cancel()
        }

        do {
            try await publishJobs(into: times, publisher: publisher)
            let deadline = ContinuousClock.now + .seconds(timeout)
            while finished() < total, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
        } catch {
            await consumer.close()
            throw error
        }
        progress.cancel()
        sampler.cancel()
        let jobsPerCommit = await BenchWorkers.jobsPerCommit(workers)
        BenchProgress.draw(done: finished(), total: total, since: firstPublish)
        FileHandle.standardError.write(Data("\n".utf8))
        await consumer.close()

        let reports = times.map { $0.report() }
        let done = reports.reduce(0) { $0 + $1.finished }
        guard done == total else {
            throw CommandFailure("only \(done) of \(total) jobs finished within \(timeout) s")
        }
        return Result(reports: reports, peakKilobytes: peakMemory.peakKilobytes, jobsPerCommit: jobsPerCommit)
    }

    /// Records each outcome event against the job it names, until every job has one.
    private static func collectOutcomes(from consumer: AMQPConsumer, into times: [BenchTimes], total: Int) async {
        var unacknowledged = 0
        for await delivery in consumer.deliveries {
            let now = ContinuousClock.now
            // One cumulative ack per 100 events (deliveries arrive in order on one channel):
            // the measuring side should cost the broker as little as it can.
            unacknowledged += 1
            if unacknowledged >= 100 {
                try? await consumer.ack(delivery, multiple: true)
                unacknowledged = 0
            }
            // report-workers' events run under a derived job id and name the request's.
            guard let object = try? JSONValue.parse(delivery.body),
                let id = (object["requestJobId"] ?? object["jobId"])?.stringValue, let jobID = JobID(id)
            else { continue }
            let failed = object["error"] != nil
            for kindTimes in times where kindTimes.finish(jobID, at: now, failed: failed) { break }
            if times.reduce(0, { $0 + $1.finishedCount }) >= total {
                if unacknowledged > 0 { try? await consumer.ack(delivery, multiple: true) }
                return
            }
        }
    }

    /// Publishes `count` jobs in confirmed batches of `window`, paced to `rate` when there is one.
    private func publishJobs(into times: [BenchTimes], publisher: AMQPPublisher) async throws {
        var bodies = kinds.map(\.bodies)
        var published = 0
        let publishStart = ContinuousClock.now
        while published < count {
            if let rate {
                // Paced: the next batch leaves when the schedule says, not as fast as possible.
                let due = publishStart + .seconds(Double(published) / Double(rate))
                if due > ContinuousClock.now { try await Task.sleep(until: due) }
            }
            let size = min(window, count - published, rate.map { max(1, $0 / 20) } ?? window)
            var messages: [OutgoingMessage] = []
            var idsOfKind = Array(repeating: [JobID](), count: kinds.count)
            for index in published..<(published + size) {
                let kind = kindOfJob(index)
                let id = JobID.random()
                idsOfKind[kind].append(id)
                var properties = MessageProperties(contentType: "application/json")
                properties.messageID = id.description
                messages.append(
                    OutgoingMessage(
                        exchange: BrokerNames.jobsExchange,
                        routingKey: kinds[kind].routingKey,
                        body: bodies[kind].body(jobID: id),
                        properties: properties
                    )
                )
            }
            let now = ContinuousClock.now
            for (kind, ids) in idsOfKind.enumerated() { times[kind].published(ids, at: now) }
            try await publisher.publish(messages, timeout: .seconds(60))
            published += size
        }
    }
}
