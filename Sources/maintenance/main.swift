import Foundation
import Maintenance

// The retention task (issue 17): one run, then exit; cron or a Kubernetes CronJob starts it.
// Settings: README.md, "Retention and the maintenance task".
exit(await MaintenanceMain.run())
