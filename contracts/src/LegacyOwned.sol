// SPDX-License-Identifier: MIT
// A registry stand-in from before the executor extension: owner() only, no getExecutorList(),
// so xgr's authorization must fall back to owner-only (XRC-729 §3.1, XRC-137 §2.3).
pragma solidity ^0.8.0;

contract LegacyOwned {
    address public owner;

    constructor() {
        owner = msg.sender;
    }
}
