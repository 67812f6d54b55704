import Foundation

/// A `multipart/form-data` body (RFC 7578) read into its parts, as an API server reads an upload.
struct MultipartFormData: Sendable {
    /// One part: a text field, or a file when it has a `filename`.
    struct Part: Sendable {
        var name: String
        var filename: String?
        var contentType: String?
        var data: Data

        /// The part's bytes as UTF-8 text (a field's value), or nil.
        var text: String? { String(data: data, encoding: .utf8) }
    }

    var parts: [Part]

    /// The first part named `name`.
    func part(_ name: String) -> Part? { parts.first { $0.name == name } }

    /// The `boundary` parameter of a `multipart/form-data` content type, unquoted; nil for any
    /// other content type.
    static func boundary(contentType: String) -> String? {
        let parameters = contentType.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard parameters.first?.lowercased() == "multipart/form-data" else { return nil }
        for parameter in parameters.dropFirst() {
            guard let equals = parameter.firstIndex(of: "="),
                parameter[..<equals].trimmingCharacters(in: .whitespaces).lowercased() == "boundary"
            else { continue }
            var value = parameter[parameter.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
                value = String(value.dropFirst().dropLast())
            }
            return value.isEmpty || value.count > 70 ? nil : value
        }
        return nil
    }

    /// Reads `body` delimited by `boundary`.
    /// - Throws: `MultipartFormData.Malformed` saying what is wrong (no opening or closing
    ///   delimiter, a part without headers or without a `Content-Disposition` name).
    static func parse(_ body: Data, boundary: String) throws(Malformed) -> MultipartFormData {
        let bytes = [UInt8](body)
        let delimiter = [UInt8]("--\(boundary)".utf8)
        let separator = [UInt8]("\r\n--\(boundary)".utf8)
        let crlf: [UInt8] = [13, 10]
        // A preamble before the first delimiter is allowed and ignored (RFC 2046 § 5.1.1).
        guard var cursor = find(delimiter, in: bytes[...], from: 0) else {
            throw Malformed(reason: "the body does not contain the boundary")
        }
        cursor += delimiter.count
        var parts: [Part] = []
        while true {
            if bytes[cursor...].starts(with: [45, 45]) { break }  // "--": the closing delimiter.
            guard bytes[cursor...].starts(with: crlf) else {
                throw Malformed(reason: "a boundary is not followed by CRLF")
            }
            cursor += 2
            guard let end = find(separator, in: bytes[...], from: cursor) else {
                throw Malformed(reason: "the body has no closing boundary")
            }
            parts.append(try part(bytes[cursor..<end]))
            cursor = end + separator.count
        }
        return MultipartFormData(parts: parts)
    }

    /// Why a body is not `multipart/form-data`.
    struct Malformed: Error, Sendable {
        var reason: String
    }

    private static func part(_ bytes: ArraySlice<UInt8>) throws(Malformed) -> Part {
        guard let headerEnd = find([13, 10, 13, 10], in: bytes, from: bytes.startIndex) else {
            throw Malformed(reason: "a part has no blank line after its headers")
        }
        let headerText = String(decoding: bytes[bytes.startIndex..<headerEnd], as: UTF8.self)
        var name: String?
        var filename: String?
        var contentType: String?
        for line in headerText.components(separatedBy: "\r\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let field = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            switch field {
            case "content-disposition":
                for parameter in value.split(separator: ";").dropFirst() {
                    let pair = parameter.split(separator: "=", maxSplits: 1).map {
                        $0.trimmingCharacters(in: .whitespaces)
                    }
                    guard pair.count == 2 else { continue }
                    let unquoted = pair[1].hasPrefix("\"") ? String(pair[1].dropFirst().dropLast()) : pair[1]
                    if pair[0].lowercased() == "name" { name = unquoted }
                    if pair[0].lowercased() == "filename" { filename = unquoted }
                }
            case "content-type":
                contentType = value
            default:
                continue
            }
        }
        guard let name else { throw Malformed(reason: "a part has no Content-Disposition name") }
        return Part(name: name, filename: filename, contentType: contentType, data: Data(bytes[(headerEnd + 4)...]))
    }

    /// The index of the first occurrence of `needle` in `haystack` at or after `start`.
    private static func find(_ needle: [UInt8], in haystack: ArraySlice<UInt8>, from start: Int) -> Int? {
        guard let first = needle.first, haystack.endIndex - start >= needle.count else { return nil }
        var index = start
        while index <= haystack.endIndex - needle.count {
            if haystack[index] == first, haystack[index..<(index + needle.count)].elementsEqual(needle) {
                return index
            }
            index += 1
        }
        return nil
    }
}
