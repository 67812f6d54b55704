// swift-tools-version: 6.1
import PackageDescription

// The code generator of scripts/generate-openapi.sh, kept apart from the backend's package so that
// neither its dependency graph nor a build plugin (~141 s of CPU per cold build, measured for issue
// 31) reaches the backend's builds: the generated client is committed, and only a spec change needs
// this package built. The version is exact so that the same spec always gives the same code.
let package = Package(
    name: "openapi-generator",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/apple/swift-openapi-generator", exact: "1.14.3")
    ],
    targets: []
)
