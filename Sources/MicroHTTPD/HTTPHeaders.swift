/// An ordered list of HTTP header fields with case-insensitive lookup by name.
///
/// Names are stored lowercased (HTTP field names are ASCII and case-insensitive), so a lookup is a
/// plain comparison. Requests rarely carry more than a dozen fields, so a linear scan beats hashing.
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields in the order they were added, names lowercased.
    public private(set) var fields: [(name: String, value: String)]

    /// Creates an empty header list.
    public init() {
        fields = []
    }

    /// Creates a header list from literal pairs.
    public init(dictionaryLiteral elements: (String, String)...) {
        fields = elements.map { (name: Self.normalize($0.0), value: $0.1) }
    }

    /// The first value of the field `name`, or `nil`.
    public subscript(name: String) -> String? {
        let key = Self.normalize(name)
        return fields.first { $0.name == key }?.value
    }

    /// Every value of the field `name`, in order.
    public func values(for name: String) -> [String] {
        let key = Self.normalize(name)
        return fields.filter { $0.name == key }.map(\.value)
    }

    /// Appends a field, keeping any earlier field of the same name.
    public mutating func add(_ name: String, _ value: String) {
        fields.append((name: Self.normalize(name), value: value))
    }

    /// Replaces every field named `name` with one field holding `value`.
    public mutating func set(_ name: String, _ value: String) {
        let key = Self.normalize(name)
        fields.removeAll { $0.name == key }
        fields.append((name: key, value: value))
    }

    /// Whether a field named `name` is present.
    public func contains(_ name: String) -> Bool {
        self[name] != nil
    }

    /// Iterates the fields in order.
    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }

    /// Makes room for `count` fields.
    public mutating func reserveCapacity(_ count: Int) {
        fields.reserveCapacity(count)
    }

    static func normalize(_ name: String) -> String {
        // Names looked up in code are already lower case; names on the wire are ASCII.
        var name = name
        let (hasUpperCase, isASCII) = name.withUTF8 { utf8 in
            utf8.reduce(into: (false, true)) { found, byte in
                found.0 = found.0 || (65...90).contains(byte)
                found.1 = found.1 && byte < 0x80
            }
        }
        guard hasUpperCase else { return name }
        guard isASCII else { return name.lowercased() }
        return name.mappingASCII { (65...90).contains($0) ? $0 | 0x20 : $0 }
    }
}

extension String {
    /// This ASCII text with every byte replaced by `transform`'s ASCII byte, in one pass.
    func mappingASCII(_ transform: (UInt8) -> UInt8) -> String {
        var source = self
        return source.withUTF8 { utf8 in
            String(unsafeUninitializedCapacity: utf8.count) { buffer in
                for index in utf8.indices { buffer[index] = transform(utf8[index]) }
                return utf8.count
            }
        }
    }
}
