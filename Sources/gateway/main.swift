import Foundation
import Gateway

// The gateway: the public HTTP API in front of the broker and the database (README, Gateway).
exit(await GatewayMain.run())
