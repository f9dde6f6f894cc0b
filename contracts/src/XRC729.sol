// SPDX-License-Identifier: MIT
// xgr's own XRC-729 orchestration registry: the interface and events of
// XRC-729_Smart_Contract_Standard.md §5.4; the owner and executor
// extension comes from OwnedExecutors.sol.
// OSTC documents are stored as the exact UTF-8 JSON strings given to setOSTC;
// xgr pins keccak-256 of the bytes getOSTC returns.
pragma solidity ^0.8.0;

import "OwnedExecutors.sol";

contract XRC729 is OwnedExecutors {
    function _tag() internal pure override returns (string memory) {
        return "XRC729";
    }

    event OSTCSet(string indexed id);
    event OSTCDeleted(string indexed id);

    string public nameXRC;

    mapping(string => string) private ostcJSON;
    mapping(string => bool) private present;
    string[] private ostcIds;
    mapping(string => uint256) private idIndex; // position + 1 in ostcIds

    constructor(string memory name_) {
        nameXRC = name_;
    }

    function getNameXRC() external view returns (string memory) {
        return nameXRC;
    }

    function hasOSTC(string calldata id) external view returns (bool) {
        return present[id];
    }

    function getOSTC(string calldata id) external view returns (string memory json) {
        require(present[id], "XRC729: unknown ostcId");
        return ostcJSON[id];
    }

    function getAllOSTC() external view returns (string[] memory) {
        return ostcIds;
    }

    function setOSTC(string calldata id, string calldata json) external onlyOwner {
        require(bytes(id).length != 0, "XRC729: empty ostcId");
        if (!present[id]) {
            present[id] = true;
            ostcIds.push(id);
            idIndex[id] = ostcIds.length;
        }
        ostcJSON[id] = json;
        emit OSTCSet(id);
    }

    function deleteOSTC(string calldata id) external onlyOwner {
        require(present[id], "XRC729: unknown ostcId");
        uint256 pos = idIndex[id] - 1;
        uint256 last = ostcIds.length - 1;
        if (pos != last) {
            string memory moved = ostcIds[last];
            ostcIds[pos] = moved;
            idIndex[moved] = pos + 1;
        }
        ostcIds.pop();
        delete idIndex[id];
        delete present[id];
        delete ostcJSON[id];
        emit OSTCDeleted(id);
    }

}
