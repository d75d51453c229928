// A stand-in for the part of Apple's Security framework that ActionHookKit's Keychain glue uses, for Linux only
// (Package.swift declares it inside `#if os(Linux)`), with Apple's names and call shapes (from the Security
// reference): Keychain items as dictionaries, kept here in memory. Core Foundation's types are stood in by Swift
// ones (`CFString` is `String`, `CFDictionary` a `[String: Any]`, `CFTypeRef` `Any`), so the glue's bridging
// casts (`as String`, `as CFDictionary`, `as? Data`) type-check as they do on Apple platforms. The additions are
// named `standIn…`: tests use them to play the system's part; the glue must never call them.
import Foundation

public typealias OSStatus = Int32
public typealias CFString = String
public typealias CFDictionary = [String: Any]
public typealias CFTypeRef = Any

public final class CFAllocator {}
public final class CFError: Error {}
public final class SecAccessControl: @unchecked Sendable {
    // @unchecked: immutable.
    public let standInProtection: String
    public let standInFlags: SecAccessControlCreateFlags

    init(protection: String, flags: SecAccessControlCreateFlags) {
        standInProtection = protection
        standInFlags = flags
    }
}

public struct SecAccessControlCreateFlags: OptionSet, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    public static let userPresence = SecAccessControlCreateFlags(rawValue: 1 << 0)
    public static let privateKeyUsage = SecAccessControlCreateFlags(rawValue: 1 << 30)
}

public let errSecSuccess: OSStatus = 0
public let errSecParam: OSStatus = -50
public let errSecDuplicateItem: OSStatus = -25299
public let errSecItemNotFound: OSStatus = -25300

public let kSecClass: CFString = "class"
public let kSecClassGenericPassword: CFString = "genp"
public let kSecAttrService: CFString = "svce"
public let kSecAttrAccount: CFString = "acct"
public let kSecAttrAccessGroup: CFString = "agrp"
public let kSecAttrAccessible: CFString = "pdmn"
public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
public let kSecAttrAccessibleWhenUnlocked: CFString = "ak"
public let kSecValueData: CFString = "v_Data"
public let kSecReturnData: CFString = "r_Data"
public let kSecMatchLimit: CFString = "m_Limit"
public let kSecMatchLimitOne: CFString = "m_LimitOne"

// swift-format-ignore: AlwaysUseLowerCamelCase
public func SecAccessControlCreateWithFlags(
    _ allocator: CFAllocator?, _ protection: CFTypeRef, _ flags: SecAccessControlCreateFlags,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecAccessControl? {
    guard let protection = protection as? String else {
        error?.pointee = Unmanaged.passRetained(CFError())
        return nil
    }
    return SecAccessControl(protection: protection, flags: flags)
}

// swift-format-ignore: AlwaysUseLowerCamelCase
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    guard let key = StandInKeychain.key(attributes), let data = attributes[kSecValueData] as? Data else {
        return errSecParam
    }
    return StandInKeychain.shared.withLock { items in
        guard items[key] == nil else { return errSecDuplicateItem }
        items[key] = StandInKeychain.Item(data: data, accessible: attributes[kSecAttrAccessible] as? String)
        return errSecSuccess
    }
}

// swift-format-ignore: AlwaysUseLowerCamelCase
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    guard let key = StandInKeychain.key(query) else { return errSecParam }
    return StandInKeychain.shared.withLock { items in
        guard var item = items[key] else { return errSecItemNotFound }
        if let data = attributesToUpdate[kSecValueData] as? Data { item.data = data }
        if let accessible = attributesToUpdate[kSecAttrAccessible] as? String { item.accessible = accessible }
        items[key] = item
        return errSecSuccess
    }
}

// swift-format-ignore: AlwaysUseLowerCamelCase
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    guard let key = StandInKeychain.key(query) else { return errSecParam }
    return StandInKeychain.shared.withLock { items in
        guard let item = items[key] else { return errSecItemNotFound }
        if query[kSecReturnData] as? Bool == true { result?.pointee = item.data }
        return errSecSuccess
    }
}

// swift-format-ignore: AlwaysUseLowerCamelCase
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    guard let key = StandInKeychain.key(query) else { return errSecParam }
    return StandInKeychain.shared.withLock { items in
        items.removeValue(forKey: key) == nil ? errSecItemNotFound : errSecSuccess
    }
}

/// The stand-in's Keychain: generic passwords by service, account and access group.
public final class StandInKeychain: @unchecked Sendable {
    // @unchecked: `items` is only touched under `lock`.
    struct Item {
        var data: Data
        var accessible: String?
    }

    static let shared = StandInKeychain()
    private let lock = NSLock()
    private var items: [String: Item] = [:]

    func withLock<Result>(_ body: (inout [String: Item]) -> Result) -> Result {
        lock.withLock { body(&items) }
    }

    static func key(_ query: CFDictionary) -> String? {
        guard query[kSecClass] as? String == kSecClassGenericPassword, let service = query[kSecAttrService] as? String,
            let account = query[kSecAttrAccount] as? String
        else { return nil }
        return [service, account, query[kSecAttrAccessGroup] as? String ?? ""].joined(separator: "\u{1F}")
    }

    /// The protection class of the item of `service` and `account`, as the glue stored it; nil when none.
    public static func standInAccessible(service: String, account: String) -> String? {
        shared.withLock { $0[[service, account, ""].joined(separator: "\u{1F}")]?.accessible }
    }
}
